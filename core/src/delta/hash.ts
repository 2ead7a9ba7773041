import { protoCanonicalHash, protoCanonicalJson, sha256Hex } from './canonical.js';
import { COMPONENT_NAMES, type ComponentName, type Components, type Peer } from '../contract/wire.js';

const MOD = 1n << 256n;

/** The peer as it counts in the hash: the fields of the wire message, nothing else. */
export function peerDigest(peer: Peer): bigint {
  const text = protoCanonicalJson({
    id: peer.id,
    nodeKey: peer.nodeKey,
    addresses: peer.addresses,
    tags: peer.tags,
    endpoints: peer.endpoints,
    inboundOnly: peer.inboundOnly,
    // Only when set, so the hash of a view without tunnel keys is what it always was.
    ...(peer.tunnelKey ? { tunnelKey: peer.tunnelKey } : {}),
  });
  return BigInt('0x' + sha256Hex(text));
}

/**
 * An order-independent digest of a view that is updated in the size of a change: the peers are a
 * multiset sum of their own digests (mod 2^256), each component has its own digest (null: absent).
 * `stateHash` turns it into the hash an agent acks and a controller compares.
 */
export interface ViewDigest {
  peerSum: bigint;
  peerCount: number;
  components: Record<ComponentName, string | null>;
}

export function emptyDigest(): ViewDigest {
  return {
    peerSum: 0n,
    peerCount: 0,
    components: { dns: null, filter: null, routeGroups: null, relays: null, tunnel: null, declaration: null },
  };
}

export function cloneDigest(d: ViewDigest): ViewDigest {
  return { peerSum: d.peerSum, peerCount: d.peerCount, components: { ...d.components } };
}

export function addPeer(d: ViewDigest, digest: bigint): void {
  d.peerSum = (d.peerSum + digest) % MOD;
  d.peerCount += 1;
}

export function removePeer(d: ViewDigest, digest: bigint): void {
  d.peerSum = (d.peerSum - digest + MOD) % MOD;
  d.peerCount -= 1;
}

export function componentDigest(value: Components[ComponentName]): string | null {
  return value === undefined ? null : protoCanonicalHash(value);
}

export function setComponents(d: ViewDigest, components: Components): void {
  for (const name of COMPONENT_NAMES) {
    if (components[name] !== undefined) d.components[name] = componentDigest(components[name]);
  }
}

/** sha256 of the canonical JSON of the digest: the state hash of the view. */
export function stateHash(d: ViewDigest): string {
  return sha256Hex(stateHashText(d));
}

/**
 * The canonical JSON `stateHash` hashes, written directly (issue 31: canonicalise was a tenth of a
 * fan-out): protoCanonicalJson of { v: 1, peers, count, components } sorts the keys, drops a count of
 * 0, and keeps every component (a hex digest or '-', never empty). Held equal by test/unit/hash.test.ts.
 */
export function stateHashText(d: ViewDigest): string {
  let c = '';
  for (const n of COMPONENT_NAMES) {
    const v = d.components[n] ?? '-';
    c += (c ? ',' : '') + (v === '' ? 'null' : JSON.stringify(v));
  }
  const count = d.peerCount === 0 ? '' : `"count":${JSON.stringify(d.peerCount)},`;
  return `{"components":[${c}],${count}"peers":"${d.peerSum.toString(16).padStart(64, '0')}","v":1}`;
}

/** The canonical form stateHashText writes, the slow way (for the test that holds the two equal). */
export function stateHashTextCanonical(d: ViewDigest): string {
  return protoCanonicalJson({
    v: 1,
    peers: d.peerSum.toString(16).padStart(64, '0'),
    count: d.peerCount,
    components: COMPONENT_NAMES.map((n) => d.components[n] ?? '-'),
  });
}

/** The digest of a whole view, from scratch (for snapshots and for checking the incremental one). */
export function digestOf(peers: Iterable<Peer>, components: Components): ViewDigest {
  const d = emptyDigest();
  for (const p of peers) addPeer(d, peerDigest(p));
  setComponents(d, components);
  return d;
}

/** Serialisable form of a digest (the controller persists it per membership). */
export interface StoredDigest {
  peerSum: string;
  peerCount: number;
  components: Record<ComponentName, string | null>;
}

export function storeDigest(d: ViewDigest): StoredDigest {
  return { peerSum: d.peerSum.toString(16), peerCount: d.peerCount, components: { ...d.components } };
}

export function loadDigest(s: StoredDigest): ViewDigest {
  return { peerSum: BigInt('0x' + (s.peerSum || '0')), peerCount: s.peerCount, components: { ...s.components } };
}
