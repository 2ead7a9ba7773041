/**
 * Only a definite answer makes an agent leave (issue 33 item 9): MESHP_NODE_REVOKED from the
 * controller, on its stream or as the stream's end. A stream lost to the network, an unreachable
 * controller or another refusal (MESHP_AUTH_FAILED included) keeps it reconnecting as before, and
 * nothing is taken away. Over an in-memory link (the loop's rules, as agent-loop.test.ts); the host
 * is real (state store, files), with a plugin that records the leave hook.
 */
import t from 'tap';
import { generateKeyPairSync, sign } from 'node:crypto';
import { PLUGIN_API_VERSION, type Leaving, type Plugin } from '@meshp/core';
import { Agent, LEFT_KEY, type LeftRecord } from '@meshp/core/agent';
import { bed } from '../helpers/host.js';
import { FakeLink } from '../helpers/grpc-fake-link.js';
import type { Subtest } from '../helpers/tap-types.js';

function world(t: Subtest) {
  const b = bed(t, 'none');
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const link = new FakeLink((input) => ({ network: 'n', node: input.node, credential: 'cred', mode: 'adopted', addresses: [] }));
  const asked: Leaving[] = [];
  const recorder: Plugin = {
    name: 'recorder',
    apiVersion: PLUGIN_API_VERSION,
    apply: (h) =>
      h.hooks.leave.tapPromise('recorder', async (l) => {
        asked.push(l);
        l.removed.push('the recorder’s tunnel');
      }),
  };
  const host = b.host([recorder]);
  const agent = new Agent(host, link, {
    node: 'a1',
    token: 'T',
    nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    sign: (p) => sign(null, p, privateKey),
    intervalMs: 60_000,
    backoff: { initialMs: 10, maxMs: 20 },
  });
  t.teardown(() => agent.stop());
  const left = async () => (await host.state()).getValue<LeftRecord>(LEFT_KEY);
  return { link, agent, asked, left };
}

for (const error of [
  { code: 'MESHP_UNAVAILABLE', message: 'connection reset' },
  { code: 'MESHP_AUTH_FAILED', message: 'the node credential is not known (never issued, or revoked by node remove)' },
]) {
  t.test(`a stream ended ${error.code} is retried, nothing taken away`, async (t) => {
    const w = world(t);
    await w.agent.start();
    const first = await w.link.nextChannel(1);
    first.deliver({ challenge: new Uint8Array([1]) });
    first.deliver({ error });
    first.close(error);
    (await w.link.nextChannel(2)).close(error);
    await w.link.nextChannel(3);
    t.pass('the agent keeps reconnecting');
    t.same(w.asked, [], 'the leave hook was not called');
    t.equal(await w.left(), null, 'the state folder is not marked left');
  });
}

t.test('MESHP_NODE_REVOKED on the stream: the agent stops following, every leave tap runs, the folder is marked left', async (t) => {
  const w = world(t);
  await w.agent.start();
  const ch = await w.link.nextChannel(1);
  ch.deliver({ challenge: new Uint8Array([1]) });
  const error = { code: 'MESHP_NODE_REVOKED', message: 'node a1 was removed from n' };
  ch.deliver({ error });
  ch.close(error);
  const l = await w.agent.left;
  t.match(l, { why: 'removed by the controller: node a1 was removed from n', network: 'n', node: 'a1' });
  t.same(l.outcome.removed, ['the recorder’s tunnel'], 'what the plugin said it removed is in the outcome');
  t.equal(w.asked.length, 1);
  t.equal(w.asked[0]!.preview, false);
  t.match(await w.left(), { why: l.why, network: 'n', node: 'a1' });
  t.ok(w.link.closed, 'the link is closed');
  await new Promise((r) => setTimeout(r, 100));
  t.equal(w.link.channels.length, 1, 'no stream opened again');
});
