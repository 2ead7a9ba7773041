/**
 * What the controller holds, shared by its parts (changes, log, sync protocol, group commit,
 * queries): the store, the networks in memory, the options, and the sync records waiting for the
 * group commit. Loaded from the store once, when the Controller is made.
 */
import { DEFAULT_RESYNC_BOUNDS, NetworkState, type MemberRecord, type ResyncBounds, type SyncRecord } from '@meshp/core/delta';
import type { ControllerStore } from '../store.js';
import { TokenBook } from '../tokens.js';
import { newSync } from '../status.js';
import type { ControllerOptions, VersionSigner } from './options.js';
import { notFound } from '@meshp/core/util';

export class ControllerState {
  readonly store: ControllerStore;
  readonly networks = new Map<string, NetworkState>();
  readonly tokens: TokenBook;
  readonly logDepth: number;
  readonly keepSent: number;
  readonly now: () => string;
  readonly resync: ResyncBounds;
  readonly signer: VersionSigner | undefined;
  readonly syncFlushMs: number;
  /** Sync records changed since the last flush, by network and node (group-commit.ts). */
  readonly dirty = new Map<string, { net: NetworkState; id: string }>();
  flushTimer: ReturnType<typeof setTimeout> | null = null;
  /** Store transactions that wrote sync records by group commit, and records written (for tests and the bench). */
  readonly syncWrites = { flushes: 0, records: 0 };

  constructor(store: ControllerStore, options: ControllerOptions) {
    this.store = store;
    this.logDepth = options.logDepth ?? 1000;
    this.keepSent = options.keepSent ?? 8;
    this.now = options.now ?? (() => new Date().toISOString());
    this.resync = { ...DEFAULT_RESYNC_BOUNDS, ...options.resync };
    this.signer = options.signer;
    this.syncFlushMs = options.syncFlushMs ?? 0;
    const s = store.load();
    for (const n of s.networks) this.networks.set(n.name, new NetworkState(n));
    for (const { network, member } of s.members) this.net(network).putMember(member);
    for (const { network, entry } of s.log) this.net(network).log.push(entry);
    for (const { network, id, sync } of s.sync) this.net(network).sync.set(id, sync);
    this.tokens = new TokenBook(store, this.now, s.tokens);
    for (const net of this.networks.values()) net.log.sort((a, b) => a.version - b.version);
  }

  net(name: string): NetworkState {
    const n = this.networks.get(name);
    if (!n) throw notFound('network', name);
    return n;
  }

  member(net: NetworkState, id: string): MemberRecord {
    const m = net.members.get(id);
    if (!m) throw notFound('node', id, net.record.name);
    return m;
  }

  /** The node's sync record, a new one when it has none yet. */
  sync(net: NetworkState, id: string): SyncRecord {
    let s = net.sync.get(id);
    if (!s) net.sync.set(id, (s = newSync()));
    return s;
  }
}

/** The key of a node's entry among the dirty sync records. */
export const dirtyKey = (network: string, id: string): string => `${network}\u0000${id}`;
