/**
 * What the controller holds, shared by its parts (changes, log, sync protocol, group commit,
 * queries): the store, the networks in memory, the options, and the sync records waiting for the
 * group commit. Loaded from the store once, when the Controller is made.
 */
import { DEFAULT_RESYNC_BOUNDS, NetworkState, type MemberRecord, type ResyncBounds, type SyncRecord } from '@meshp/core/delta';
import type { ControllerStore } from '../store.js';
import { TokenBook } from '../tokens.js';
import { newSync } from '../status.js';
import { applyRemote } from '../remote.js';
import { CommittedStore, type Touched } from './committed.js';
import { imageKey } from './image.js';
import { StoreHealth } from './store-health.js';
import type { ControllerOptions, VersionSigner } from './options.js';
import { notFound } from '@meshp/core/util';

export class ControllerState {
  /** The configured store behind the committed image (committed.ts): memory is put back as the image holds it when a transaction throws. */
  readonly store: CommittedStore;
  readonly health: StoreHealth;
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
  /** The group commit failed: the delay before the next try grows until a flush succeeds (group-commit.ts). */
  flushRetries = 0;
  /** Store transactions that wrote sync records by group commit, and records written (for tests and the bench). */
  readonly syncWrites = { flushes: 0, records: 0 };

  constructor(store: ControllerStore, options: ControllerOptions) {
    this.health = new StoreHealth();
    this.store = new CommittedStore(store, this.health);
    this.store.rolledBack = (t) => this.restore(t);
    this.logDepth = options.logDepth ?? 1000;
    this.keepSent = options.keepSent ?? 8;
    this.now = options.now ?? (() => new Date().toISOString());
    this.resync = { ...DEFAULT_RESYNC_BOUNDS, ...options.resync };
    this.signer = options.signer;
    this.syncFlushMs = options.syncFlushMs ?? 0;
    const s = this.store.load();
    for (const n of s.networks) this.networks.set(n.name, new NetworkState(n));
    for (const { network, member } of s.members) this.net(network).putMember(member);
    for (const { network, entry } of s.log) this.net(network).log.push(entry);
    for (const { network, id, sync } of s.sync) this.net(network).sync.set(id, sync);
    this.tokens = new TokenBook(this.store, this.now);
    for (const net of this.networks.values()) net.log.sort((a, b) => a.version - b.version);
  }

  /**
   * A transaction threw and the store rolled back: every network it wrote, or whose version in
   * memory is not the image's, is put back exactly as the image holds it, in place (the same
   * NetworkState, remote.ts taking it whole); the sync records of the nodes that remain are kept,
   * but those the transaction wrote are the image's again (as after a restart: the hello recovers
   * an ack lost so, group-commit.ts). A network only in memory goes; one only in the image comes back.
   */
  restore(t: Touched): void {
    const img = this.store.image;
    const names = new Set(t.networks);
    // A network whose asynchronous change is still being committed is ahead of the image by design: its own answer settles it.
    for (const [n, net] of this.networks) if (img.networks.get(n)?.version !== net.record.version && !this.store.settling.has(n)) names.add(n);
    for (const n of img.networks.keys()) if (!this.networks.has(n)) names.add(n);
    for (const n of names) {
      const record = img.networks.get(n);
      if (!record) {
        this.networks.delete(n);
        continue;
      }
      const members = [...(img.members.get(n)?.values() ?? [])];
      applyRemote(this.networks, {
        network: n,
        record: structuredClone(record),
        entries: structuredClone(img.log.get(n) ?? []),
        members: structuredClone(members),
      });
      const net = this.networks.get(n)!;
      for (const id of net.members.keys()) {
        if (!t.sync.has(imageKey(n, id))) continue;
        const kept = img.sync.get(imageKey(n, id));
        net.sync.set(id, kept ? structuredClone(kept) : newSync());
      }
    }
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
