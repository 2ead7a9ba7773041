/**
 * Every candidate endpoint tried in turn (issue 27), on real namespaces and wireguard-go: two nodes
 * each given the other with a first endpoint nobody answers on (an address of the underlay no node
 * holds) and the real one second. The plugin moves each to its next candidate when no handshake came
 * within ENDPOINT_TRY_MS; they handshake, the endpoint in use is the real one, it is kept (no move
 * after), TCP flows; and a view change that still carries the candidate leaves the chosen one alone.
 */
import t from 'tap';
import type { StateDelta } from '@meshp/core';
import { ENDPOINT_TRY_MS, type TunnelStatus } from '@meshp/tunnel-wireguard';
import { labAvailable } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';
import { WG_PORT, peerOf, tunnelLab, tunnelOf, type LabNode } from './bed.js';

const DEAD = `10.98.0.77:${WG_PORT}`;
const rule = (from: string, to: string) => ({ sourceTags: [from], destinationTags: [to], ports: ['7000'] });
const endpointOn = async (n: LabNode, of: LabNode): Promise<string> => {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'endpoints']);
  return (
    stdout
      .split('\n')
      .map((l) => l.split('\t'))
      .find(([k]) => k === of.publicKey)?.[1] ?? ''
  );
};
const moves = (n: LabNode) => n.lines.filter((l) => l.msg === 'no handshake: next candidate endpoint');

t.test('candidates tried in turn', { skip: labAvailable() ? false : 'needs root for namespaces and wireguard-go (CI runs it as root)' }, async (t) => {
  const [n1, n2] = (await tunnelLab(t, 2)) as [LabNode, LabNode];
  for (const n of [n1, n2]) await n.start(60_000);
  const withDeadFirst = (of: LabNode, tags: string[]) => {
    const p = peerOf(of, tags);
    return { ...p, endpoints: [DEAD, ...p.endpoints] };
  };
  const snapshot = (n: LabNode, d: Omit<StateDelta, 'fromVersion' | 'toVersion' | 'network'>, from = 0, to = 1) =>
    n.delta({ network: 'lab', fromVersion: from, toVersion: to, ...d });
  await snapshot(n1, { upsertPeers: [withDeadFirst(n2, ['app'])], removePeers: [], tunnel: tunnelOf(n1), filter: { rules: [] } });
  await snapshot(n2, { upsertPeers: [withDeadFirst(n1, ['web'])], removePeers: [], tunnel: tunnelOf(n2), filter: { rules: [rule('web', 'app')] } });
  t.equal(await endpointOn(n1, n2), DEAD, 'n1 starts on the first candidate: the dead one');

  // No traffic is sent: the persistent keepalive starts the handshake, the move sends it to the next candidate.
  const idleSeconds = (3 * ENDPOINT_TRY_MS) / 1000 + 30;
  await until('a handshake between n1 and n2', async () => ((await n1.wgPeers()).get(n2.publicKey) ?? 0) > 0, idleSeconds, 1000);
  t.ok(moves(n1).length + moves(n2).length >= 1, `a node moved to its next candidate (n1 ${moves(n1).length}, n2 ${moves(n2).length})`);
  t.equal(await endpointOn(n1, n2), `${n2.underlay}:${WG_PORT}`, "n1 sends to n2's real endpoint");
  t.equal(await endpointOn(n2, n1), `${n1.underlay}:${WG_PORT}`, "n2 sends to n1's real endpoint");
  t.ok(await n1.reaches(n2), 'TCP flows n1 → n2:7000');

  // Kept: a try's time and more with the handshake fresh, no move; the endpoint stays.
  const before = moves(n1).length + moves(n2).length;
  await new Promise((r) => setTimeout(r, ENDPOINT_TRY_MS + 6_000));
  t.equal(moves(n1).length + moves(n2).length, before, 'no move while the handshake is fresh');
  t.equal(await endpointOn(n1, n2), `${n2.underlay}:${WG_PORT}`, 'the endpoint that handshaked is kept');

  // A view change to n2 (a tag) that still carries both candidates: the chosen one stays.
  await snapshot(n1, { upsertPeers: [{ ...withDeadFirst(n2, ['app', 'db']) }], removePeers: [] }, 1, 2);
  t.equal(await endpointOn(n1, n2), `${n2.underlay}:${WG_PORT}`, 'an upsert of the peer does not go back to the first candidate');
  const st = (await n1.request({ op: 'status' })).tunnel as TunnelStatus;
  t.equal(st.lastError, null);
});
