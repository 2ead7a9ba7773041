/**
 * What a misbehaving client can and cannot make a real controller do, over real gRPC: a hash that
 * keeps differing gets snapshots with exponential backoff, then the membership is `diverged` (coded,
 * on /metrics, in the controller's log, and told to the agent) and no more snapshots go; its next view
 * change brings one snapshot again, which heals it when applied with the hash expected; a matching hello clears it;
 * resync requests beyond the limit end the stream with MESHP_RATE_LIMITED; garbage bytes on the
 * stream are answered MESHP_MESSAGE_MALFORMED and logged with the peer.
 */
import t from 'tap';
import { metricsText } from '../helpers/prom.js';
import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { challengePayload } from '@meshp/core/agent';
import { versionPayload } from '@meshp/core/delta';
import {
  adminCalls,
  tokenFor,
  meshpAsync,
  meshpJsonAsync,
  startController,
  waitUntil,
  workdir,
  type ControllerProc,
  nodes as listNodes,
} from '../helpers/grpc-procs.js';
import { RawAgent, garbageOnSync } from '../helpers/raw-agent.js';

async function metrics(ctl: ControllerProc): Promise<string> {
  return metricsText(ctl.metrics);
}

t.test('a hash that keeps differing: bounded snapshots, then diverged', async (t) => {
  const dir = workdir(t, 'hardening');
  const ctl = await startController(t, join(dir, 'ctl'));
  const DIVERGED = 'membership diverged: no more snapshots until an ack or a hello matches';
  const liar = new RawAgent(ctl);
  t.teardown(() => liar.link.close());
  await liar.enrol(await tokenFor(ctl, ['a']), 'liar');
  // A second one, diverged alongside, that is mended meanwhile: it heals by the snapshot its next view change brings.
  const mended = new RawAgent(ctl);
  t.teardown(() => mended.link.close());
  await mended.enrol(await tokenFor(ctl, ['a']), 'mended');
  let mendedLies = true;
  const s = liar.open({ ack: () => 'not-the-hash' });
  const s2 = mended.open({ ack: (_v, hash) => (mendedLies ? 'not-the-hash' : hash) });
  const line = await ctl.proc.waitFor((l) => l.msg === DIVERGED && l.node === 'liar', 60_000);
  t.equal(line.code, 'MESHP_DIVERGED', 'the controller says why, with a code');
  await waitUntil('the agent told', () => s.errors.length > 0);
  t.same(
    s.errors.map((e) => e.code),
    ['MESHP_DIVERGED'],
    'the agent is told once, on a stream that stays open',
  );
  const sent = s.deltas.length;
  t.ok(sent >= 2 && sent <= 4, `${sent} snapshots before diverged (the storm was hundreds a second)`);
  t.ok(
    s.deltas.every((d) => d.fromVersion === 0),
    'each a snapshot',
  );
  const times = ctl.proc.lines.filter((l) => l.msg === 'snapshot sent' && l.node === 'liar').map((l) => Number(l.time));
  const waits = times.slice(1).map((x, i) => x - times[i]!);
  // Lower bounds only (a timer never fires early; a busy machine only adds): 1 s, 2 s, 4 s.
  t.ok(waits.length >= 2 && waits.every((w, i) => w >= 1000 * 2 ** i - 50), `the waits between them double: ${waits.join(', ')} ms`);
  const m = await metrics(ctl);
  t.match(m, /meshp_diverged\{network="default",node="liar",code="MESHP_DIVERGED"\} 1/, '/metrics shows the diverged membership');
  const listed = (
    await meshpJsonAsync<{ nodes: { name: string; diverged: string | null }[] }>('node', 'list', '--state', join(dir, 'ctl'), '--controller', ctl.address)
  ).nodes;
  t.match(listed.find((n) => n.name === 'liar')?.diverged ?? '', /^MESHP_DIVERGED: /, 'node list --json carries it, coded');
  // Nothing more goes however often it lies or asks.
  for (let i = 0; i < 3; i++) s.ch.send({ ack: { appliedVersion: liar.applier.appliedVersion, stateHash: 'still-not' } });
  s.ch.send({ resync: { appliedVersion: 0, reason: 2, detail: 'give me more' } });
  await new Promise((r) => setTimeout(r, 1_500));
  t.equal(s.deltas.length, sent, 'no snapshot after diverged');

  // A change of their view (who may reach tag a): one snapshot each. The liar's hash still differs:
  // diverged again at once, no backoff round; the mended one's matches: healed, at gap 0.
  await ctl.proc.waitFor((l) => l.msg === DIVERGED && l.node === 'mended', 60_000);
  const mendedSent = s2.deltas.length;
  mendedLies = false;
  const mark = ctl.proc.lines.length;
  // Over the in-process Admin client (what `meshp policy set` sends): the controller is under test, not the CLI.
  await t.resolves(adminCalls(() => ctl).policy([{ from: 'b', to: 'a' }]), 'policy set');
  await ctl.proc.waitFor((l) => l.msg === DIVERGED && l.node === 'liar', 20_000, mark);
  t.equal(s.deltas.length, sent + 1, 'a view change brings the diverged liar one snapshot, no more');
  t.equal(s.deltas.at(-1)!.fromVersion, 0);
  await waitUntil('told again', () => s.errors.length > 1);
  t.same(
    s.errors.map((e) => e.code),
    ['MESHP_DIVERGED', 'MESHP_DIVERGED'],
    'and it is told again',
  );
  const healed = await waitUntil('mended healed', async () => {
    const text = await metrics(ctl);
    return !/meshp_diverged\{[^}]*node="mended"/.test(text) && /meshp_convergence_gap\{network="default",node="mended"\} 0/.test(text) && text;
  });
  t.match(healed, /meshp_diverged\{network="default",node="liar",code="MESHP_DIVERGED"\} 1/, 'the liar is still diverged');
  t.equal(s2.deltas.length, mendedSent + 1, 'the mended agent healed by that one snapshot');
  s.ch.close();
  await s.closed;
  s2.ch.close();
  await s2.closed;

  // The agent comes back with the view it really holds: the hello matches, diverged is cleared.
  const honest = liar.open();
  let after = '';
  for (let i = 0; i < 80 && (after = await metrics(ctl)).match(/meshp_diverged\{[^}]*node="liar"/); i++) await new Promise((r) => setTimeout(r, 250));
  t.notMatch(after, /meshp_diverged\{[^}]*node="liar"/, 'a hello with the hash expected clears diverged');
  t.match(after, /meshp_convergence_gap\{network="default",node="liar"\} 0/);
  honest.ch.close();
  await honest.closed;
});

t.test('resync requests beyond the limit end the stream; garbage bytes get a code and a log line', async (t) => {
  const dir = workdir(t, 'hardening2');
  const ctl = await startController(t, join(dir, 'ctl'));
  const a = new RawAgent(ctl);
  t.teardown(() => a.link.close());
  await a.enrol(await tokenFor(ctl), 'asker');
  const s = a.open();
  await waitUntil('snapshot', () => s.deltas.length > 0);
  for (let i = 0; i < 12; i++) s.ch.send({ resync: { appliedVersion: a.applier.appliedVersion, reason: 1, detail: `ask ${i}` } });
  const closed = await s.closed;
  t.equal(closed?.code, 'MESHP_RATE_LIMITED', 'the stream ends with MESHP_RATE_LIMITED');
  const snapshots = s.deltas.length;
  t.ok(snapshots <= 5, `${snapshots} snapshots for 12 requests (bounded by the backoff, then the limit)`);

  const mark = ctl.proc.lines.length;
  const r = await garbageOnSync(ctl, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]));
  t.match(r.details, /^MESHP_MESSAGE_MALFORMED: /, `garbage bytes are answered with a code (${r.details})`);
  const logged = await ctl.proc.waitFor((l) => l.code === 'MESHP_MESSAGE_MALFORMED', 15_000, mark);
  t.match(String(logged.peer), /127\.0\.0\.1:\d+/, 'and logged with the peer');
  t.match(await metrics(ctl), /meshp_refusals_total\{code="MESHP_MESSAGE_MALFORMED"\} 1/);
});

t.test('a version past the network is honoured only with the controller signature; past 2^32 everything still answers', async (t) => {
  const dir = workdir(t, 'hardening3');
  const state = join(dir, 'ctl');
  let ctl = await startController(t, state);
  const a = new RawAgent(ctl);
  t.teardown(() => a.link.close());
  await a.enrol(await tokenFor(ctl), 'claimer');
  let s = a.open();
  await waitUntil('snapshot applied', () => a.applier.appliedVersion > 0);
  const real = s.deltas.at(-1)!;
  t.ok(real.versionSignature && real.versionSignature.length === 32, "every delta carries the controller's tag of its version (an HMAC, ADR 0037)");
  t.equal(real.stateHash, a.applier.view.hash(), 'and the hash expected once applied');
  s.ch.close();
  await s.closed;
  const at = a.applier.appliedVersion;

  // A lie: version 2^32 - 1, no signature; then the real signature replayed for a higher version.
  const lies = [
    { what: 'no signature', sig: undefined },
    { what: 'the signature of another version', sig: real.versionSignature },
  ];
  for (const lie of lies) {
    const mark = ctl.proc.lines.length;
    const ch = a.link.sync();
    const closed = new Promise<{ code: string } | undefined>((resolve) => ch.onClose(resolve));
    ch.onMessage((m) => {
      if (!('challenge' in m)) return;
      s = { ch, deltas: [], errors: [], closed } as never;
      ch.send({ hello: { ...helloOf(a, m.challenge), appliedVersion: 4294967295, ...(lie.sig ? { versionSignature: lie.sig } : {}) } });
    });
    t.equal((await closed)?.code, 'MESHP_VERSION_UNPROVEN', `a version claimed with ${lie.what} is refused`);
    const logged = await ctl.proc.waitFor((l) => l.msg === 'sync refused' && l.code === 'MESHP_VERSION_UNPROVEN', 15_000, mark);
    t.match(String(logged.peer), /127\.0\.0\.1/, 'and logged with the peer');
  }
  t.equal((await listNodes(ctl)).find((n) => n.name === 'claimer')!.stateVersion, at, "the network's version did not move");

  // A signature the controller did make (read from its key, standing in for a restored controller's
  // agents; an Ed25519 signature, as a controller before ADR 0037 made: still honoured): the network
  // moves past 2^32, and every admin answer still serialises.
  const key = createPrivateKey(readFileSync(join(state, 'controller.version.key')));
  const far = 2 ** 32 + 5;
  const sig = sign(null, versionPayload('default', far, a.applier.view.hash()), key);
  const s2 = a.open({ hello: () => ({ appliedVersion: far, stateHash: a.applier.view.hash(), versionSignature: sig }) });
  await waitUntil('moved past 2^32', () => a.applier.appliedVersion > far);
  s2.ch.send({
    report: {
      appliedVersion: a.applier.appliedVersion,
      mode: 'converged',
      firewallKind: 'none',
      firewallActive: false,
      resources: [],
      at: new Date().toISOString(),
    },
  });
  // Waited for in this process (a CLI process per look costs seconds on a busy machine); then the
  // CLI's own answers past 2^32 are read once each, side by side.
  await waitUntil(
    'at gap 0 and the report past 2^32 listed',
    async () => {
      const r = await (await ctl.admin!()).call('listNodes', { network: 'default' });
      return r.nodes.some((x) => x.name === 'claimer' && Number(x.gap) === 0 && Number(x.reportedVersionWide) > 2 ** 32);
    },
    90_000,
  );
  const cliArgs = ['--state', state, '--controller', ctl.address];
  const [listed2, show, doc] = await Promise.all([
    meshpJsonAsync<{ nodes: { name: string; gap: number; stateVersion: number; reportedVersion: number }[] }>('node', 'list', ...cliArgs),
    meshpAsync('node', 'show', 'claimer', '--json', ...cliArgs),
    meshpAsync('doctor', 'claimer', '--json', ...cliArgs),
  ]);
  const n = listed2.nodes.find((x) => x.name === 'claimer')!;
  t.equal(n.stateVersion, far + 1, `node list answers at version ${n.stateVersion}`);
  t.equal(n.reportedVersion, far + 1, 'the reported version past 2^32 is listed whole');
  t.equal(show.code, 0, `node show past 2^32: ${show.err}`);
  t.equal(doc.code, 0, `doctor past 2^32: ${doc.err}`);
  s2.ch.close();
  await s2.closed;

  // A store already past 2^32 opens and answers after a restart (every version field is 64-bit).
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
  ctl = await startController(t, state, [], ctl.address);
  t.equal((await listNodes(ctl)).find((x) => x.name === 'claimer')!.stateVersion, far + 1, 'after a restart too');
});

function helloOf(a: RawAgent, nonce: Uint8Array) {
  const h = a.applier.hello();
  return {
    node: a.enrolment.node,
    credential: a.enrolment.credential,
    appliedVersion: h.appliedVersion,
    stateHash: h.stateHash,
    revision: 1,
    signature: a.sign(challengePayload(a.enrolment.node, nonce)),
  };
}
