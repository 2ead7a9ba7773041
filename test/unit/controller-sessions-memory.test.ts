/**
 * What the SessionHub keeps per node goes with the node (issue 15, controller memory): a removed
 * node's "last heard from" time is dropped, and a renamed node's moves to its new name, so that
 * nodes enrolled and removed over time (ephemeral hosts) do not leave an entry each behind, and a
 * node enrolled later under a removed or renamed node's name does not inherit its time.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthStore, Controller, MemoryStore, Metrics, SessionHub, createLogger } from '@meshp/controller';
import type { AgentMessage, ControllerMessage, SyncChannel, TransportError } from '@meshp/core';
import { PROTOCOL_REVISION, challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { until } from '../helpers/budget.js';

const NET = 'default';

/** One end of a stream in memory: it answers the challenge and acks what it applies, as an agent does. */
class MemoryStream implements SyncChannel<AgentMessage, ControllerMessage> {
  readonly #in: ((m: AgentMessage) => void)[] = [];
  readonly #closed: ((e?: TransportError) => void)[] = [];
  ended = false;
  snapshots = 0;
  readonly applier = new DeltaApplier();

  constructor(readonly node: string, private readonly credential: string, private readonly key: KeyObject) {}

  send(m: ControllerMessage): void {
    if (this.ended) return;
    queueMicrotask(() => this.#agent(m));
  }
  onMessage(l: (m: AgentMessage) => void): void {
    this.#in.push(l);
  }
  onClose(l: (e?: TransportError) => void): void {
    this.#closed.push(l);
  }
  close(e?: TransportError): void {
    if (this.ended) return;
    this.ended = true;
    for (const l of this.#closed) l(e);
  }
  #say(m: AgentMessage): void {
    queueMicrotask(() => this.#in.forEach((l) => l(m)));
  }
  #agent(m: ControllerMessage): void {
    if ('challenge' in m) {
      const { appliedVersion, stateHash } = this.applier.hello();
      this.#say({ hello: { node: this.node, credential: this.credential, appliedVersion, stateHash, revision: PROTOCOL_REVISION, signature: sign(null, challengePayload(this.node, m.challenge), this.key) } });
    } else if ('delta' in m) {
      this.snapshots++;
      const r = this.applier.receive(structuredClone(m.delta));
      if (r.status === 'applied') this.#say({ ack: r.ack });
    }
  }
}

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
  t.same(hub.live(NET, 'n0'), { connected: false, lastSeen: '' }, 'nothing is kept for the removed node');
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
  t.same(hub.live(NET, 'n1'), { connected: true, lastSeen: seen }, 'the stream and its time go on under the new name');
  t.same(hub.live(NET, 'n0'), { connected: false, lastSeen: '' }, 'nothing is left under the old name');
});
