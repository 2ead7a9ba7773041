import { digestOf, emptyDigest, stateHash, type ViewDigest } from '../hash.js';
import { COMPONENT_NAMES, type Components, type Peer, type StateDelta } from '../../contract/wire.js';

interface PeerEntry {
  peer: Peer;
  digest: bigint;
}

/**
 * The agent-side view: the peers this node may see, its components, the version they are at and
 * an incrementally kept digest. Change it only through `applyDelta` (or `DeltaApplier`).
 */
export class AgentView {
  network = '';
  version = 0;
  readonly peers = new Map<string, PeerEntry>();
  components: Components = {};
  digest: ViewDigest = emptyDigest();

  get size(): number {
    return this.peers.size;
  }

  peer(id: string): Peer | undefined {
    return this.peers.get(id)?.peer;
  }

  /** The hash the agent acks: order-independent, sha256 of canonical JSON. */
  hash(): string {
    return stateHash(this.digest);
  }

  /** The view as the snapshot of its version would carry it (peers sorted by id). */
  toSnapshot(): StateDelta {
    const upsertPeers = [...this.peers.values()].map((e) => e.peer).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const out: StateDelta = { fromVersion: 0, toVersion: this.version, upsertPeers, removePeers: [], network: this.network };
    for (const name of COMPONENT_NAMES) {
      if (this.components[name] !== undefined) Object.assign(out, { [name]: this.components[name] });
    }
    return out;
  }

  /** Recomputes the digest from scratch; equals `digest` unless something went wrong. */
  recomputeHash(): string {
    return stateHash(
      digestOf(
        [...this.peers.values()].map((e) => e.peer),
        this.components,
      ),
    );
  }
}
