/**
 * The controller's relays over real gRPC (issue 27, ADR 0040), with two agents (SimAgent: the wire's
 * Sync stream, no tunnel device) that report tunnel keys: `setRelay` sends each its own TURN REST
 * credential in the relays component (through the wire's encoding, never the secret); a's report of
 * its allocation's relayed address reaches b as a's last candidate (`relay:IP:PORT`), and `relay
 * list` says it; a report without one withdraws it; `removeRelay` takes the credentials away.
 */
import t from 'tap';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import type { ReportMessage } from '@meshp/core';
import { startController, tokenFor, waitUntil, workdir } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';

const SECRET = 'relay-controller-secret-9d2e';
const dir = workdir(t, 'relay-controller');
const ctl = await startController(t, join(dir, 'ctl'));
const { fingerprint } = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
const admin = await ctl.admin!();
const [a, b] = ['a', 'b'].map((n) => new SimAgent(n, ctl.address, fingerprint)) as [SimAgent, SimAgent];
t.teardown(() => [a, b].forEach((x) => x.close()));
const key = (n: number) => Buffer.alloc(32, n).toString('base64');
await a.enrol(await tokenFor(ctl, ['site']), key(1));
await b.enrol(await tokenFor(ctl, ['site']), key(2));
await admin.call('setPolicy', { network: 'default', rules: [{ fromTag: 'site', toTag: 'site', ports: [] }] });
for (const x of [a, b]) x.open();
const report = (x: SimAgent, n: number, relayed?: string): ReportMessage => ({
  appliedVersion: x.applier.hello().appliedVersion,
  mode: 'converged',
  firewallKind: 'none',
  firewallActive: false,
  resources: [],
  at: new Date().toISOString(),
  tunnelKey: key(n),
  tunnelInterface: 'meshp0',
  peerHandshakes: [],
  ...(relayed ? { relayedAddress: relayed, relayId: 'eu1' } : {}),
});
await waitUntil('a sees b with its tunnel key', () => a.applier.view.peer('b')?.tunnelKey === key(2), 60_000).catch((e: unknown) => {
  t.comment(
    ctl.proc.lines
      .slice(-20)
      .map((l) => JSON.stringify(l))
      .join('\n'),
  );
  throw e;
});
await waitUntil('both streams open', () => a.send({ report: report(a, 1) }) && b.send({ report: report(b, 2) }));

t.test('each tunnel member is sent its own credential; a relayed address reaches the peer as its last candidate', async (t) => {
  await admin.call('setRelay', {
    network: 'default',
    relay: { id: 'eu1', address: '203.0.113.5', port: 3478, transport: 'udp', region: '', secretName: 'coturn' },
    secret: SECRET,
    preview: false,
  });
  const relayOf = (x: SimAgent) => x.applier.view.components.relays?.relays[0];
  await waitUntil('both have a credential', () => relayOf(a) && relayOf(b));
  for (const [x, name] of [
    [a, 'a'],
    [b, 'b'],
  ] as const) {
    const r = relayOf(x)!;
    t.match(r.username, new RegExp(`^\\d+:${name}$`), `${name}: username EXPIRY:${name}`);
    t.equal(r.password, createHmac('sha1', SECRET).update(r.username).digest('base64'), `${name}: the HMAC coturn checks`);
    t.ok(r.expires - Date.now() / 1000 > 3000, `${name}: valid about an hour`);
  }
  t.notMatch(JSON.stringify([...a.deltas, ...b.deltas]), new RegExp(SECRET), 'the secret is in no delta');

  a.send({ report: report(a, 1, '203.0.113.5:49170') });
  await waitUntil("b has a's relayed candidate", () => a.applier && b.applier.view.peer('a')?.endpoints.includes('relay:203.0.113.5:49170'));
  t.equal(b.applier.view.peer('a')?.endpoints.at(-1), 'relay:203.0.113.5:49170', 'last of its endpoints');
  const list = await admin.call('listRelays', { network: 'default' });
  t.same(list.relays[0]?.allocations, [{ node: 'a', relayedAddress: '203.0.113.5:49170' }], 'relay list says the allocation');

  a.send({ report: report(a, 1) });
  await waitUntil('the candidate withdrawn', () => !b.applier.view.peer('a')?.endpoints.some((e) => e.startsWith('relay:')));
  await admin.call('removeRelay', { network: 'default', id: 'eu1', preview: false });
  await waitUntil('the credentials gone', () => (a.applier.view.components.relays?.relays.length ?? 0) === 0);
  t.pass('removed: no credential left on a');
});
