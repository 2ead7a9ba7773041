/**
 * What a misbehaving client can and cannot make a real controller do, over real gRPC: a hash that
 * keeps differing gets snapshots with exponential backoff, then the membership is `diverged` (coded,
 * on /metrics and in the controller's log) and no more snapshots go; a matching hello clears it;
 * resync requests beyond the limit end the stream with MESHP_RATE_LIMITED; garbage bytes on the
 * stream are answered MESHP_MESSAGE_MALFORMED and logged with the peer.
 */
import t from 'tap';
import { join } from 'node:path';
import { createToken, startController, waitUntil, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { RawAgent, garbageOnSync } from '../helpers/raw-agent.js';

async function metrics(ctl: ControllerProc): Promise<string> {
  return (await fetch(`http://${ctl.metrics}/metrics`)).text();
}

t.test('a hash that keeps differing: bounded snapshots, then diverged', async (t) => {
  const dir = workdir(t, 'hardening');
  const ctl = await startController(t, join(dir, 'ctl'));
  const liar = new RawAgent(ctl);
  t.teardown(() => liar.link.close());
  await liar.enrol(createToken(ctl), 'liar');
  const s = liar.open({ ack: () => 'not-the-hash' });
  const line = await ctl.proc.waitFor((l) => l.msg === 'membership diverged: no more snapshots until an ack or a hello matches', 60_000);
  t.equal(line.code, 'MESHP_DIVERGED', 'the controller says why, with a code');
  const sent = s.deltas.length;
  t.ok(sent >= 2 && sent <= 4, `${sent} snapshots before diverged (the storm was hundreds a second)`);
  t.ok(s.deltas.every((d) => d.fromVersion === 0), 'each a snapshot');
  const times = ctl.proc.lines.filter((l) => l.msg === 'snapshot sent' && l.node === 'liar').map((l) => Number(l.time));
  const waits = times.slice(1).map((x, i) => x - times[i]!);
  t.ok(waits.slice(1).every((w, i) => w >= waits[i]! * 1.5), `the waits between them grow: ${waits.join(', ')} ms`);
  const m = await metrics(ctl);
  t.match(m, /meshp_diverged\{network="default",node="liar",code="MESHP_DIVERGED"\} 1/, '/metrics shows the diverged membership');
  // Nothing more goes however often it lies or asks.
  for (let i = 0; i < 3; i++) s.ch.send({ ack: { appliedVersion: liar.applier.appliedVersion, stateHash: 'still-not' } });
  s.ch.send({ resync: { appliedVersion: 0, reason: 2, detail: 'give me more' } });
  await new Promise((r) => setTimeout(r, 1_500));
  t.equal(s.deltas.length, sent, 'no snapshot after diverged');
  s.ch.close();
  await s.closed;

  // The agent comes back with the view it really holds: the hello matches, diverged is cleared.
  const honest = liar.open();
  let after = '';
  for (let i = 0; i < 80 && (after = await metrics(ctl)).match(/meshp_diverged\{[^}]*node="liar"/); i++) await new Promise((r) => setTimeout(r, 250));
  t.notMatch(after, /meshp_diverged\{[^}]*node="liar"/, 'a hello with the hash expected clears diverged');
  t.match(after, /meshp_convergence_gap\{network="default",node="liar",mode="converged"\} 0/);
  honest.ch.close();
  await honest.closed;
});

t.test('resync requests beyond the limit end the stream; garbage bytes get a code and a log line', async (t) => {
  const dir = workdir(t, 'hardening2');
  const ctl = await startController(t, join(dir, 'ctl'));
  const a = new RawAgent(ctl);
  t.teardown(() => a.link.close());
  await a.enrol(createToken(ctl), 'asker');
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
