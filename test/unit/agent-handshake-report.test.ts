/**
 * The agent sends its tunnel's handshakes so the controller can tell a tunnel that carries nothing
 * (issue 33 item 4), without a report per rekey: the handshakes of a tunnel plugin are in its report;
 * a newer handshake alone sends a report only once the newest one sent is HANDSHAKE_REPORT_AFTER_S
 * old (WireGuard rekeys each peer every 2 minutes), so the controller knows it at most that late.
 */
import t from 'tap';
import { generateKeyPairSync, sign } from 'node:crypto';
import { PLUGIN_API_VERSION, type PeerHandshake, type Plugin } from '@meshp/core';
import { Agent, HANDSHAKE_REPORT_AFTER_S, type AgentLog } from '@meshp/core/agent';
import { Controller, MemoryStore } from '@meshp/controller';
import { bed } from '../helpers/host.js';
import { FakeLink } from '../helpers/grpc-fake-link.js';
import { until } from '../helpers/budget.js';

const NET = 'n';

t.test('handshakes go in the report; a newer one alone is news only once the newest sent is older than the limit', async (t) => {
  const b = bed(t, 'auto');
  const controller = new Controller(new MemoryStore());
  controller.createNetwork(NET);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const link = new FakeLink((input) => {
    controller.join(NET, { id: input.node, nodeKey: input.nodeKey });
    return { network: NET, node: input.node, credential: 'cred', mode: 'adopted', addresses: [] };
  });
  let reconciled = 0;
  const count = (_f: Record<string, unknown>, msg: string) => {
    if (msg === 'reconciled' || msg === 'reconcile refused') reconciled++;
  };
  const log: AgentLog = { info: count, warn: count, error: count };
  // A tunnel plugin's part, as tunnel-wireguard plays it: the peers and their handshakes, in the report hook.
  let handshakes: PeerHandshake[] = [];
  const tunnel: Plugin = {
    name: 'fake-tunnel',
    apiVersion: PLUGIN_API_VERSION,
    apply: (host) => host.hooks.report.tapPromise('fake-tunnel', async (r) => ({ ...r, handshakes })),
  };
  const agent = new Agent(b.host([tunnel]), link, {
    node: 'a1',
    token: 'T',
    nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    sign: (p) => sign(null, p, privateKey),
    intervalMs: 60_000,
    log,
  });
  t.teardown(() => agent.stop());
  await agent.start();
  const ch = await link.nextChannel(1);
  ch.deliver({ challenge: new Uint8Array([1]) });
  const [hello] = await ch.waitFor('hello');
  controller.hello(NET, 'a1', hello!.appliedVersion, hello!.stateHash);
  ch.deliver({ delta: controller.deltaFor(NET, 'a1')! });
  // The ack follows the delta's reconcile: none is running after it.
  await ch.waitFor('ack');
  const reconcile = async () => {
    const before = reconciled;
    agent.requestReconcile('test');
    await until('a reconcile', () => reconciled > before, 20, 10);
  };
  const reports = () => ch.of('report');
  const now = () => Math.floor(Date.now() / 1000);
  const key = 'x'.repeat(43) + '=';

  t.same(reports().at(-1)!.peerHandshakes, [], 'a tunnel with no peer reports none: not "not reported"');

  // Handshake times far from now, so that how long a reconcile takes on a busy machine moves no verdict.
  handshakes = [{ peer: 'm2', publicKey: key, latestHandshake: now() + 600 }];
  await reconcile();
  t.same(reports().at(-1)!.peerHandshakes, handshakes, 'a peer configured: reported, with its handshake');
  const sent = reports().length;

  handshakes = [{ peer: 'm2', publicKey: key, latestHandshake: now() + 601 }];
  await reconcile();
  t.equal(reports().length, sent, `a newer handshake while the newest sent is under ${HANDSHAKE_REPORT_AFTER_S} s old: no report`);

  handshakes = [{ peer: 'm2', publicKey: key, latestHandshake: now() + 100 }];
  await reconcile();
  t.equal(reports().length, sent, 'an older one is no news either');

  handshakes = [
    { peer: 'm2', publicKey: key, latestHandshake: now() + 602 },
    { peer: 'm3', publicKey: key, latestHandshake: 0 },
  ];
  await reconcile();
  t.equal(reports().length, sent + 1, 'a new peer is news');
  t.same(
    reports()
      .at(-1)!
      .peerHandshakes!.map((h) => h.peer),
    ['m2', 'm3'],
  );

  handshakes = [{ peer: 'm3', publicKey: key, latestHandshake: now() - 600 }];
  await reconcile();
  t.equal(reports().length, sent + 2, 'a peer gone is news');
  handshakes = [{ peer: 'm3', publicKey: key, latestHandshake: now() - 599 }];
  await reconcile();
  t.equal(reports().length, sent + 3, `a newer handshake once the newest sent is over ${HANDSHAKE_REPORT_AFTER_S} s old: reported`);
  t.equal(reports().at(-1)!.peerHandshakes![0]!.latestHandshake, handshakes[0]!.latestHandshake);
});
