/**
 * What the SessionHub keeps per node goes with the node (issue 15, controller memory): a removed
 * node's "last heard from" time is dropped, and a renamed node's moves to its new name, so that
 * nodes enrolled and removed over time (ephemeral hosts) do not leave an entry each behind, and a
 * node enrolled later under a removed or renamed node's name does not inherit its time.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthStore, Controller, MemoryStore, Metrics, SessionHub, createLogger } from '@meshp/controller';
import { until } from '../helpers/budget.js';
import { MemoryStream } from '../helpers/memory-stream.js';

const NET = 'default';

function bed(t: Subtest) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-sessions-memory-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const controller = new Controller(new MemoryStore());
  controller.createNetwork(NET);
  controller.setPolicy(NET, [{ from: 'all', to: 'all' }]);
  const auth = new AuthStore(join(dir, 'auth.db'));
  t.teardown(() => auth.close());
  const hub = new SessionHub(controller, auth, new Metrics(), createLogger('sessions-memory-test', 'silent'));
  t.teardown(() => hub.closeAll());
  /** A node joined, its stream opened and heard from (its hello and ack). */
  const connect = async (id: string, peer: string): Promise<MemoryStream> => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    controller.join(NET, { id, nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), tags: ['all'] });
    auth.putCredential(`cred-${id}`, NET, id);
    const s = new MemoryStream(id, `cred-${id}`, privateKey);
    hub.open(s, peer);
    await until(`${id} connected and snapshotted`, () => hub.live(NET, id).connected && s.applier.appliedVersion > 0, 40, 5);
    return s;
  };
  return { controller, auth, hub, connect };
}

t.test('a removed node leaves no "last heard from" behind', async (t) => {
  const { controller, hub, connect } = bed(t);
  const s = await connect('n0', 'peer-0');
  t.not(hub.live(NET, 'n0').lastSeen, '', 'heard from while connected');
  controller.leave(NET, 'n0');
  hub.endNode(NET, 'n0', { code: 'MESHP_NODE_REVOKED', message: 'node n0 was removed from default' });
  t.ok(s.ended, 'its stream ended');
  t.match(hub.live(NET, 'n0'), { connected: false, lastSeen: '', lastContact: '' }, 'nothing is kept for the removed node');
  // A new node under the same name is not taken for the old one.
  await connect('n0', 'peer-1');
  t.ok(hub.live(NET, 'n0').connected, 'a new n0 connects');
});

t.test('a renamed node keeps its "last heard from" under its new name only', async (t) => {
  const { controller, hub, connect } = bed(t);
  await connect('n0', 'peer-0');
  const seen = hub.live(NET, 'n0').lastSeen;
  t.not(seen, '', 'heard from while connected');
  controller.renameNode(NET, 'n0', 'n1');
  hub.renamed(NET, 'n0', 'n1');
  t.match(hub.live(NET, 'n1'), { connected: true, lastSeen: seen }, 'the stream and its time go on under the new name');
  t.match(hub.live(NET, 'n0'), { connected: false, lastSeen: '', lastContact: '' }, 'nothing is left under the old name');
});

t.test('last contact is the stream, not the last message: now while connected, then when it ended', async (t) => {
  const { hub, connect } = bed(t);
  const s = await connect('n0', 'peer-0');
  const message = hub.live(NET, 'n0').lastSeen;
  // An idle agent sends nothing: its last message ages, its contact does not.
  await new Promise((r) => setTimeout(r, 50));
  const before = new Date().toISOString();
  const live = hub.live(NET, 'n0');
  t.equal(live.lastSeen, message, 'the last message stays the last message');
  t.ok(live.lastContact! >= before && live.lastContact! > message, `connected: contact is now (${live.lastContact}), not the last message (${message})`);
  const closing = new Date().toISOString();
  s.close();
  await until('n0 disconnected', () => !hub.live(NET, 'n0').connected, 40, 5);
  const ended = hub.live(NET, 'n0');
  t.ok(ended.lastContact! >= closing, `not connected: contact is when the stream ended (${ended.lastContact})`);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(hub.live(NET, 'n0').lastContact, ended.lastContact, 'and it stays there');
});
