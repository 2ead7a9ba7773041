/**
 * Acks batched to the store, over real gRPC: a controller whose group commit would come long after
 * (--sync-flush-ms 600000) is killed (SIGKILL) after its agents acked a change, and started again on
 * the same state and port. What they were sent and acked since the last flush is lost; each agent's
 * hello says its version and hash again, the controller checks it against the view it computes, and
 * every agent is back at gap 0 without a snapshot.
 */
import t from 'tap';
import { metricsText } from '../helpers/prom.js';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { wire } from '@meshp/transport-grpc';
import { nodes, startController, tokenFor, waitUntil, workdir } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';

const N = 6;

t.test(`${N} agents acked a change the store never got: after a kill and restart, gap 0 with no snapshot`, async (t) => {
  const dir = workdir(t, 'ack-batch');
  const state = join(dir, 'ctl');
  const flags = ['--sync-flush-ms', '600000'];
  let ctl = await startController(t, state, flags);
  const { fingerprint } = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE));
  const agents = Array.from({ length: N }, (_, i) => new SimAgent(`s${i}`, ctl.address, fingerprint));
  t.teardown(() => agents.forEach((a) => a.close()));
  for (const a of agents) await a.enrol(await tokenFor(ctl, ['all']));
  await (await ctl.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports: [] }] });
  for (const a of agents) a.open();
  const current = async () => {
    const ns = await nodes(ctl);
    return ns.length === N && ns.every((n) => n.gap === 0 && n.appliedVersion === n.stateVersion) && ns;
  };
  await waitUntil(`${N} agents current`, current, 60_000);

  // A change all of them see, acked by all; nothing of it but the change reaches the disk before the kill.
  const before = ctl.proc.lines.length;
  await (await ctl.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports: ['443'] }] });
  const top = await waitUntil(
    'the change acked by all',
    async () => {
      const ns = await current();
      return ns && ns.every((n) => n.appliedVersion > 0) && ns[0]!.stateVersion;
    },
    60_000,
  );
  // One info line per fan-out (each agent's delta is a debug line): together they reached all N, up to the change's version.
  const fanouts = ctl.proc.lines.slice(before).filter((l) => l.msg === 'fan-out sent' && l.network === 'default');
  t.ok(fanouts.reduce((n, l) => n + Number(l.agents), 0) >= N, `each agent was sent the change (${fanouts.length} fan-out line(s))`);
  t.equal(Math.max(...fanouts.map((l) => Number(l.version))), top, `the fan-out line names version ${top}`);
  t.ok(
    agents.every((a) => a.applier.appliedVersion === top),
    `every agent applied version ${top}`,
  );

  // meshp_delta_bytes_sent_total counts the bytes on the wire: the sum of each delta's protobuf encoding.
  const encoded = agents.reduce(
    (sum, a) =>
      sum + a.deltas.reduce((k, d) => k + wire.SyncResponse.encode(wire.SyncResponse.fromPartial({ delta: d as wire.StateDelta })).finish().length, 0),
    0,
  );
  const text = await metricsText(ctl.metrics);
  const counted = Number(/^meshp_delta_bytes_sent_total (\d+)$/m.exec(text)?.[1] ?? NaN);
  t.equal(
    counted,
    encoded,
    `meshp_delta_bytes_sent_total is the encoded size of the ${agents.reduce((k, a) => k + a.deltas.length, 0)} messages received (${encoded} bytes)`,
  );
  const json = agents.reduce((sum, a) => sum + a.deltas.reduce((k, d) => k + JSON.stringify(d).length, 0), 0);
  t.ok(counted < json, `and not their JSON length (${json})`);

  ctl.proc.kill('SIGKILL');
  await ctl.proc.exited;
  ctl = await startController(t, state, flags, ctl.address);
  await waitUntil(`${N} streams opened again`, () => agents.every((a) => a.streams >= 2), 60_000);
  const back = await waitUntil(`${N} agents back at gap 0`, current, 60_000);
  t.equal(back[0]!.stateVersion, top, 'the change survived the kill');
  t.ok(
    back.every((n) => n.appliedVersion === top && n.gap === 0),
    'every agent at gap 0, at the version it applied',
  );
  const opened = await waitUntil(`${N} hellos logged`, () => {
    const o = ctl.proc.lines.filter((l) => l.msg === 'sync stream opened');
    return o.length >= N && o;
  });
  t.ok(
    opened.every((l) => l.resume === true),
    'every hello resumed',
  );
  t.equal(ctl.proc.lines.filter((l) => l.msg === 'snapshot sent').length, 0, 'no snapshot was sent after the restart');
  t.ok(
    agents.every((a) => a.applier.appliedVersion === top),
    'no agent moved',
  );
});
