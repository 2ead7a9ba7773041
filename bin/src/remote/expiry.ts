/**
 * `meshp node expire|renew|rekey` and `meshp network lifetime` (issue 28, docs/adr/0041): a node's
 * credential expired now or renewed, the network's node lifetime, a node's WireGuard key rotated.
 * Each change is previewed (--preview), asked unless --yes, audited by the controller.
 */
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';
import { confirmChange, say, type Out } from '../output.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';
import { parseTtl } from './ops.js';
import { nodeJson } from './render.js';

type Change = { preview: boolean; yes: boolean };

/** A duration as the CLI takes it (90s, 30m, 12h, 180d), in seconds. */
export function durationOf(text: string, flag: string): number {
  if (!/^\d+\s*[smhd]?$/.test(text.trim())) throw usage(`${flag} ${text} is not a duration (90s, 30m, 12h, 180d)`);
  return parseTtl(text);
}

const peersText = (peers: readonly string[]) => (peers.length ? peers.join(', ') : 'none');

/** `meshp node expire NODE --preview | --yes`: its credential ends now; its peers drop it in one delta; it stays a member. */
export async function nodeExpire(a: RemoteArgs & Out & Change & { node: string }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const ask = { network, node: a.node };
    if (a.preview || !a.yes) {
      const p = await c.call('expireNode', { ...ask, preview: true });
      const text = p.unchanged
        ? `${a.node} is expired already (${present(p.node, 'node').expiredAt}): nothing to change`
        : `would expire ${a.node} now: its hello is refused (MESHP_NODE_EXPIRED) until an admin renews it; its peers drop it from their filter and allowed IPs in one delta (${peersText(p.peers)}); it stays a member`;
      if (a.preview)
        return say(
          a,
          { preview: true, node: a.node, peers: p.peers, unchanged: p.unchanged, stateVersion: p.stateVersion },
          `${text}\n(preview: nothing changed)`,
        );
      if (!a.json) process.stderr.write(`${text}\n`);
      await confirmChange(false, `Expire ${a.node} now?`, 'pass --yes to expire it (or --preview to see what it does)');
    }
    const r = await c.call('expireNode', { ...ask, preview: false });
    const node = present(r.node, 'node');
    say(
      a,
      { node: nodeJson(node), peers: r.peers, unchanged: r.unchanged, stateVersion: r.stateVersion },
      r.unchanged
        ? `${a.node} is expired already (${node.expiredAt}): nothing changed`
        : `expired ${a.node} (state version ${r.stateVersion}): its peers drop it (${peersText(r.peers)}); meshp node renew ${a.node} brings it back`,
    );
  });
}

/** `meshp node renew NODE [--for DURATION] --preview | --yes`: the term starts again from now; an expired node is back in one delta. */
export async function nodeRenew(a: RemoteArgs & Out & Change & { node: string; for?: string }): Promise<void> {
  const seconds = a.for === undefined ? 0 : durationOf(a.for, '--for');
  await withAdmin(a, async (c, network) => {
    const ask = { network, node: a.node, seconds };
    if (a.preview || !a.yes) {
      const p = await c.call('renewNode', { ...ask, preview: true });
      const n = present(p.node, 'node');
      const text = `would renew ${a.node} until about ${p.expiresAt} (now ${n.expiresAt || 'never expires'}${n.expiredAt ? `, expired ${n.expiredAt}` : ''})${n.expiredAt ? `: back in its peers' views in one delta (${peersText(p.peers)})` : ''}`;
      if (a.preview)
        return say(
          a,
          { preview: true, node: a.node, expiresAt: p.expiresAt, peers: p.peers, stateVersion: p.stateVersion },
          `${text}\n(preview: nothing changed)`,
        );
      if (!a.json) process.stderr.write(`${text}\n`);
      await confirmChange(false, `Renew ${a.node}?`, 'pass --yes to renew it (or --preview to see what it does)');
    }
    const r = await c.call('renewNode', { ...ask, preview: false });
    say(
      a,
      { node: nodeJson(present(r.node, 'node')), expiresAt: r.expiresAt, peers: r.peers, stateVersion: r.stateVersion },
      `renewed ${a.node} until ${r.expiresAt} (state version ${r.stateVersion})${r.peers.length ? `: back in the views of ${peersText(r.peers)}` : ''}`,
    );
  });
}

/** `meshp network lifetime [DURATION]`: the network's node lifetime, read or set (each enrolment and renewal from then on). */
export async function networkLifetime(a: RemoteArgs & Out & { duration?: string }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    if (a.duration === undefined) {
      const r = await c.call('getNodeLifetime', { network });
      return say(
        a,
        { network, seconds: r.seconds, default: r.default },
        `node lifetime of ${network}: ${r.seconds} s (${r.seconds / 86400} days)${r.default ? ' (the default)' : ''}`,
      );
    }
    const r = await c.call('setNodeLifetime', { network, seconds: durationOf(a.duration, 'lifetime') });
    say(
      a,
      { network, seconds: r.seconds, secondsBefore: r.secondsBefore },
      `node lifetime of ${network}: ${r.secondsBefore} s -> ${r.seconds} s (each enrolment and renewal from now on; a node's expiry now stays until it renews)`,
    );
  });
}

/**
 * `meshp node rekey NODE --preview | --yes [--timeout S]`: the node's agent makes a new WireGuard key
 * and reports it; its peers get it in one delta. Waits for the controller to hold the new key.
 */
export async function nodeRekey(a: RemoteArgs & Out & Change & { node: string; timeout: number }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const ask = { network, node: a.node };
    if (a.preview || !a.yes) {
      const p = await c.call('rekeyNode', { ...ask, preview: true });
      const text = `would ask ${a.node}'s agent for a new WireGuard key (now ${p.tunnelKey}); it reports the public key, and its peers get it in one delta (${peersText(p.peers)}); until then their tunnel to it is down`;
      if (a.preview) return say(a, { preview: true, node: a.node, tunnelKey: p.tunnelKey, peers: p.peers }, `${text}\n(preview: nothing changed)`);
      if (!a.json) process.stderr.write(`${text}\n`);
      await confirmChange(false, `Rekey ${a.node}?`, 'pass --yes to rekey it (or --preview to see what it does)');
    }
    const r = await c.call('rekeyNode', { ...ask, preview: false });
    const before = r.tunnelKey;
    const until = Date.now() + a.timeout * 1000;
    for (;;) {
      const n = present((await c.call('showNode', ask)).node, 'node');
      if (n.tunnelKey && n.tunnelKey !== before)
        return say(
          a,
          { node: a.node, tunnelKeyBefore: before, tunnelKey: n.tunnelKey, peers: r.peers, stateVersion: n.stateVersion },
          `rekeyed ${a.node}: ${before} -> ${n.tunnelKey} (state version ${n.stateVersion}); its peers get the new key in one delta (${peersText(r.peers)})`,
        );
      if (Date.now() > until)
        throw new MeshpError(
          'MESHP_TIMEOUT',
          `${a.node} was asked for a new tunnel key but has not reported one in ${a.timeout} s (its agent's log says why); the controller holds ${before}`,
        );
      await new Promise((res) => setTimeout(res, 200));
    }
  });
}
