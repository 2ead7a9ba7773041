// One process of the fleet simulator (fleet.bench.mjs forks several): its share of the agents,
// each with its own Ed25519 key, pinned TLS channel and Sync stream, driven by the parent over IPC.
// A request is { id, cmd, ... }; the answer { id, ok, r } or { id, ok: false, error }; progress
// without an id ({ enrolled } every agent). Times are absolute (timeOrigin + now) so the parent can
// compare them across processes.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { generateKeyPairSync, sign } from 'node:crypto';
import { Backoff, PROTOCOL_REVISION, challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { GrpcControlLink, wire } from '@meshp/transport-grpc';
import { connectAdmin } from '../../bin/dist/remote/admin.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

// grpc-js keeps one global subchannel pool per process and, for every new channel, compares it with
// every subchannel to the same target (channelOptionsEqual), O(N) per channel. A real agent has one
// channel; N of them in one process made each enrolment cost O(N) here (at N = 3,000, 8.5 s of this
// process's CPU in getOrCreateSubchannel, growing with every agent). Each link's credentials are its
// own (pinnedCredentials makes a new secure context), so no two links ever shared a subchannel: the
// pool is kept per credentials instead, which finds the same subchannels without the scan.
//
// With `share` K > 1 (--streams-per-connection), K links in a row are given one pool and the first
// one's credentials (the same pin), so their calls share one subchannel: one TLS connection and HTTP/2
// session carrying K agents' Sync streams. Each agent still has its own key, credential and stream
// and signs its own Hello; only the socket is shared. It is how more agents than the controller's
// open-file limit can be held on a machine that cannot raise it (this container: 20,000).
let share = 1;
/** `light` (--light-agents): an agent keeps its version, the hash the controller sent and a peer count, not a view. */
let light = false;
{
  const grpcRequire = createRequire(fileURLToPath(import.meta.resolve('@meshp/transport-grpc')));
  const { SubchannelPool, getSubchannelPool } = grpcRequire('@grpc/grpc-js/build/src/subchannel-pool.js');
  const global = getSubchannelPool(true);
  if (typeof global?.getOrCreateSubchannel !== 'function' || typeof SubchannelPool !== 'function')
    throw new Error('grpc-js subchannel pool not where the fleet bench expects it');
  const byCredentials = new WeakMap();
  let made = 0;
  let group = null;
  global.getOrCreateSubchannel = (uri, address, args, creds) => {
    let entry = byCredentials.get(creds);
    if (!entry) {
      if (!group || made % share === 0) group = { pool: new SubchannelPool(), creds };
      made++;
      byCredentials.set(creds, (entry = group));
    }
    return entry.pool.getOrCreateSubchannel(uri, address, args, entry.creds);
  };
}

/**
 * What a light agent keeps (--light-agents): the version and state hash of the last delta applied and
 * a count of peers, no view. It acks each whole delta with the version it reaches and the state hash
 * the controller sent with it (what a real agent's view hashes to when it applied it right), so the
 * controller does the same work; it refuses nothing. At N = 5,000 all-to-all the views would be 25
 * million peer objects in the simulator (several GB), which this shared machine cannot hold.
 */
class LightApplier {
  version = 0;
  hash = new DeltaApplier().hello().stateHash;
  peers = 0;
  parts = 0;
  hello() {
    return { appliedVersion: this.version, stateHash: this.hash };
  }
  receive(delta) {
    const stale = delta.fromVersion === 0 ? delta.toVersion < this.version : delta.toVersion <= this.version && delta.fromVersion < this.version;
    if (stale) return { status: 'stale' };
    const part = delta.part;
    if (delta.fromVersion === 0 && (!part || part.index === 0)) this.peers = 0;
    this.peers += (delta.upsertPeers?.length ?? 0) - (delta.removePeers?.length ?? 0);
    if (part && part.count > 1 && part.index < part.count - 1) return { status: 'partial' };
    this.version = delta.toVersion;
    this.hash = delta.stateHash;
    return { status: 'applied', ack: { appliedVersion: this.version, stateHash: this.hash } };
  }
  resyncRequest(err) {
    return { appliedVersion: this.version, reason: 2, detail: String(err) };
  }
}

class SimAgent {
  applier = light ? new LightApplier() : new DeltaApplier();
  key = generateKeyPairSync('ed25519');
  acked = new Map(); // version → time acked
  deltas = 0;
  bytes = 0;
  firstAt = 0;
  /** Streams opened (reconnects: the agent's own jittered backoff) and how they ended. */
  opens = 0;
  ends = new Map();
  backoff = new Backoff({ initialMs: 250, maxMs: 15_000 });
  closed = false;
  /** Peer id → when a delta (not a snapshot) first brought it: when this agent's gap for that join was 0. */
  seen = new Map();

  constructor(ctl, name, tag) {
    this.name = name;
    this.tag = tag;
    this.link = new GrpcControlLink({ address: ctl.address, fingerprint: ctl.fingerprint });
    this.first = new Promise((r) => (this.gotFirst = r));
  }

  async enrol(token) {
    const nodeKey = this.key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    // As the agent does: an answer that did not come (a busy machine) is asked again with the same token and key.
    for (let attempt = 1; ; attempt++) {
      try {
        this.enrolment = await this.link.enrol({ token, nodeKey, node: this.name, endpoints: [] });
        return;
      } catch (e) {
        if (e?.code !== 'MESHP_UNAVAILABLE' || attempt >= 5) throw e;
        await sleep(this.backoff.next());
      }
    }
  }

  open() {
    if (this.closed) return;
    const ch = this.link.sync();
    this.ch = ch;
    this.opens++;
    ch.onClose((e) => {
      const code = e?.code ?? 'closed';
      this.ends.set(code, (this.ends.get(code) ?? 0) + 1);
      // A removed node's agent leaves, as core's agent does (agent.ts): it does not come back to be refused again.
      if (code === 'MESHP_NODE_REVOKED') this.closed = true;
      if (!this.closed) setTimeout(() => this.open(), this.backoff.next());
    });
    ch.onMessage((m) => {
      if ('challenge' in m) {
        const { appliedVersion, stateHash } = this.applier.hello();
        const signature = sign(null, challengePayload(this.enrolment.node, m.challenge), this.key.privateKey);
        ch.send({
          hello: { node: this.enrolment.node, credential: this.enrolment.credential, appliedVersion, stateHash, revision: PROTOCOL_REVISION, signature },
        });
      } else if ('delta' in m) {
        this.deltas++;
        // Its size on the wire: the protobuf encoding of the message received (a light agent: only a
        // delta of up to 64 peers, which is what a join or removal is; a snapshot's is not counted).
        if (!light || (m.delta.upsertPeers?.length ?? 0) + (m.delta.removePeers?.length ?? 0) <= 64)
          this.bytes += wire.SyncResponse.encode(wire.SyncResponse.fromPartial({ delta: m.delta })).finish().length;
        let r;
        try {
          r = this.applier.receive(m.delta);
        } catch (err) {
          ch.send({ resync: this.applier.resyncRequest(err) });
          return;
        }
        if (r.status !== 'applied') return;
        // A light agent notes the peers a small delta brought (a join), not a policy change's thousands.
        if (m.delta.fromVersion !== 0 && (!light || (m.delta.upsertPeers?.length ?? 0) <= 64))
          for (const p of m.delta.upsertPeers ?? []) if (!this.seen.has(p.id)) this.seen.set(p.id, now());
        if (!this.firstAt) {
          this.firstAt = now();
          this.gotFirst();
        }
        this.backoff.reset();
        this.acked.set(r.ack.appliedVersion, now());
        ch.send({ ack: r.ack });
      }
    });
  }

  close() {
    this.closed = true;
    this.ch?.close?.();
    this.link.close?.();
  }
}

async function pool(items, n, fn) {
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) await fn(items[i++]);
    }),
  );
}

/** { name, ctl, tag } given by init; the agents once enrolled. */
let plan = [];
let ctls = [];
let admin;
let network;
const agents = [];

/** A token for one agent; a call that timed out on a busy machine is made again (an unused token is harmless). */
async function newToken(tag) {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await admin.call('createToken', { network, mode: 2, ttlSeconds: 3600, tags: [tag] })).token;
    } catch (e) {
      if (e?.code !== 'MESHP_UNAVAILABLE' || attempt >= 5) throw e;
      await sleep(1000 * attempt);
    }
  }
}

const commands = {
  async init(m) {
    ({ plan, ctls, network } = m);
    share = Math.max(1, m.share ?? 1);
    light = Boolean(m.light);
    admin = await connectAdmin({ state: m.adminState });
  },
  /** One token each (single-use), `concurrency` at a time. */
  async enrol(m) {
    await pool(plan, m.concurrency, async (p) => {
      const a = new SimAgent(ctls[p.ctl], p.name, p.tag);
      await a.enrol(await newToken(p.tag));
      agents.push(a);
      process.send({ enrolled: 1 });
    });
  },
  /** Streams opened with at most `window` of them waiting for their snapshot; answered once all are open. */
  async open(m) {
    await pool(agents, m.window, async (a) => {
      a.open();
      await a.first;
    });
  },
  counts() {
    const ends = {};
    let snapshotted = 0,
      acked = 0,
      deltas = 0,
      bytes = 0,
      opens = 0;
    for (const a of agents) {
      if (a.firstAt) snapshotted++;
      acked += a.acked.size;
      deltas += a.deltas;
      bytes += a.bytes;
      opens += a.opens;
      for (const [k, v] of a.ends) ends[k] = (ends[k] ?? 0) + v;
    }
    return { agents: agents.length, snapshotted, acked, deltas, bytes, opens, ends };
  },
  clearAcks() {
    for (const a of agents) {
      a.acked.clear();
      a.seen.clear();
    }
  },
  /** The last ack time of every agent that acked since clearAcks. */
  ackTimes() {
    return agents.filter((a) => a.acked.size).map((a) => Math.max(...a.acked.values()));
  },
  /** A new agent, enrolled with the token the parent made, its stream opened. */
  async late(m) {
    const a = new SimAgent(ctls[m.ctl ?? 0], m.name, m.tag);
    const start = now();
    await a.enrol(m.token);
    const answered = now();
    a.open();
    agents.push(a);
    return { node: a.enrolment.node, start, answered };
  },
  /**
   * For each join { name, node, tag, start }: how long after its start each agent of its group that
   * had its snapshot before then applied (and acked) the delta bringing the new node, and how many
   * such agents never did; and the joiner's own first snapshot, if it is one of this worker's.
   */
  joinReport(m) {
    const byTag = new Map();
    for (const a of agents) {
      if (!byTag.has(a.tag)) byTag.set(a.tag, []);
      byTag.get(a.tag).push(a);
    }
    const byName = new Map(agents.map((a) => [a.name, a]));
    return m.joins.map((j) => {
      const lat = [];
      let missing = 0;
      for (const a of byTag.get(j.tag) ?? []) {
        if (a.name === j.name || !a.firstAt || a.firstAt >= j.start) continue;
        const t = a.seen.get(j.node);
        if (t === undefined) missing++;
        else lat.push(t - j.start);
      }
      const self = byName.get(j.name);
      return { lat, missing, own: self ? (self.firstAt ? self.firstAt - j.start : null) : undefined };
    });
  },
  close() {
    for (const a of agents) a.close();
    admin?.close();
    setTimeout(() => process.exit(0), 100);
  },
};

process.on('message', async (m) => {
  try {
    const r = await commands[m.cmd](m);
    process.send({ id: m.id, ok: true, r });
  } catch (e) {
    process.send({ id: m.id, ok: false, error: String(e?.stack ?? e) });
  }
});
process.on('disconnect', () => process.exit(0));
