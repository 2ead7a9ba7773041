/**
 * The node's relay (issue 27, ADR 0040, 0046): one allocation on the first relay of the view's `relays`
 * component (with the credential the controller minted for this node), opened beside the deltas so
 * a relay that does not answer never holds them up, watched (a Refresh every WATCH_MS: a relay
 * restarted has forgotten the allocation) and opened again when it is lost — on the next relay of
 * the component (a failover: an allocation lost or refused moves on, round and round; a relay that
 * comes back later moves nobody back). A peer whose view
 * entry carries a relayed candidate (`relay:IP:PORT`, its own allocation's address) gets a loopback
 * socket of the proxy as its last candidate endpoint (candidates.ts tries it after the direct ones);
 * a peer that leaves the view loses its socket, and its permission lapses on the relay.
 */
import type { Relay, Relays } from '@meshp/core';
import { oneLine } from '@meshp/core/util';
import { RelayProxy } from './relay-proxy.js';
import type { PeerConfig } from './peer-config.js';

/** How often the allocation is checked, and a lost or refused one asked again. */
export const RELAY_WATCH_MS = 10_000;
/** How many closed relay sockets are remembered as such (relayed paths that are gone). */
const FORMER_KEPT = 1024;

interface Log {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

const serverOf = (r: Relay): string => (r.address.includes(':') ? `[${r.address}]:${r.port}` : `${r.address}:${r.port}`);
const sameServer = (a: Relay, b: Relay): boolean => a.id === b.id && serverOf(a) === serverOf(b) && a.transport === b.transport;

export class RelayPaths {
  #relay: Relay | null = null;
  /** The view's relays with a credential, in its order: the failover's list. */
  #list: Relay[] = [];
  #proxy: RelayProxy | null = null;
  #opening = false;
  #timer: ReturnType<typeof setInterval> | null = null;
  #closed = false;
  /**
   * The loopback sockets this node's proxies held and closed (an allocation lost, a peer dropped):
   * a device still sending to one is on a relayed path that is gone, not on a direct one. The newest
   * FORMER_KEPT are kept.
   */
  readonly #former = new Set<string>();

  /** `changed`: the allocation came or went (the peers' candidates are to be made again). */
  constructor(
    readonly wireguardPort: () => number,
    readonly log: Log,
    readonly changed: () => void,
  ) {}

  /**
   * The view's relays: the one in use is kept while the view has it, else the first is used; a relay
   * moved (its server) is a new allocation. A new credential is kept for the next allocation: the
   * one held goes on under the username it was made with (relay-proxy.ts: coturn refuses another
   * on it, and does not expire it while it is refreshed).
   */
  follow(relays: Relays | undefined): void {
    this.#list = relays?.relays.filter((r) => r.username && r.password) ?? [];
    const before = this.#relay;
    const next = (before && this.#list.find((r) => r.id === before.id)) || this.#list[0] || null;
    this.#relay = next;
    if (!next) {
      if (before) void this.#lose('the relay was removed');
      return;
    }
    if (before && !sameServer(before, next)) void this.#lose('the relay moved');
    if (!this.#timer && !this.#closed) {
      this.#timer = setInterval(() => void this.#watch(), RELAY_WATCH_MS);
      this.#timer.unref();
    }
    if (!this.#proxy) void this.#open();
  }

  /** The relay after the one in use (the failover): the next of the view's, round and round. */
  #moveOn(): void {
    const r = this.#relay;
    if (!r || this.#list.length < 2) return;
    const at = this.#list.findIndex((x) => x.id === r.id);
    this.#relay = this.#list[(at + 1) % this.#list.length]!;
    this.log.warn({ relay: r.id, next: this.#relay.id }, 'relay: moving on to the next relay of the view');
  }

  /** The loopback sockets of the peers that carry a relayed candidate: made before their configs are (async). */
  async prepare(relayed: Iterable<string | undefined>): Promise<void> {
    const p = this.#proxy;
    if (!p) return;
    for (const r of relayed) if (r) await p.peer(r).catch((e: unknown) => this.log.warn({ peer: r, err: oneLine(e) }, 'relay: no permission for the peer'));
  }

  /** The config with the peer's relayed path last among its candidates (when the allocation is held and its socket made). */
  withRelay(conf: PeerConfig): PeerConfig {
    const local = this.localFor(conf);
    if (!local) return conf;
    const direct = conf.candidates ?? (conf.endpoint ? [conf.endpoint] : []);
    const candidates = [...direct.filter((e) => e !== local), local];
    return { ...conf, endpoint: conf.endpoint ?? local, ...(candidates.length > 1 ? { candidates } : {}) };
  }

  /** The loopback socket of the peer's relayed path, when the allocation is held and the socket made. */
  localFor(conf: PeerConfig): string | undefined {
    return conf.relayed && this.#proxy ? this.#proxy.localOf(conf.relayed) : undefined;
  }

  /**
   * The sockets held against the peers' relayed addresses now: a socket no peer's address names any
   * more goes (a leftover of an allocation or an address that moved in between), and the answer says
   * whether a peer's address has no socket yet (then `prepare` and the peers' configs are due again).
   * What the events did (a view change, an allocation made or lost) is checked this way on every
   * endpoint tick, so an order the events came in that left a path unmade is mended, not kept.
   */
  reconcile(relayed: Iterable<string | undefined>): { missing: boolean } {
    const p = this.#proxy;
    if (!p) return { missing: false };
    const want = new Set([...relayed].filter((r): r is string => !!r));
    for (const held of p.peers) if (!want.has(held)) this.#dropFrom(p, held);
    return { missing: [...want].some((r) => !p.localOf(r)) };
  }

  /** The peer left the view (or its relayed address moved): its socket goes. */
  drop(relayed: string | undefined): void {
    if (relayed && this.#proxy) this.#dropFrom(this.#proxy, relayed);
  }

  /** Whether `endpoint` is a socket of a relayed path this node had and closed (the device not told yet). */
  wasRelay(endpoint: string): boolean {
    return this.#former.has(endpoint);
  }

  #dropFrom(p: RelayProxy, relayed: string): void {
    this.#remember(p.localOf(relayed));
    p.drop(relayed);
  }

  #remember(local: string | undefined): void {
    if (!local) return;
    this.#former.delete(local);
    this.#former.add(local);
    for (const old of this.#former) {
      if (this.#former.size <= FORMER_KEPT) break;
      this.#former.delete(old);
    }
  }

  /** Whether the device's endpoint is a relayed path, and whether anything came back through it from the peer. */
  carried(endpoint: string): { fromRelay: number } | null {
    return this.#proxy?.carried(endpoint) ?? null;
  }

  /** What the report says: the allocation's relayed address and the relay's id. */
  report(): { relayId: string; relayedAddress: string } | null {
    const a = this.#proxy?.relayedAddress;
    return a && this.#relay ? { relayId: this.#relay.id, relayedAddress: a } : null;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const p = this.#proxy;
    this.#proxy = null;
    await p?.close();
  }

  async #open(): Promise<void> {
    const r = this.#relay;
    if (!r || this.#opening || this.#proxy || this.#closed) return;
    this.#opening = true;
    try {
      const proxy = await RelayProxy.open({
        server: serverOf(r),
        credential: r,
        wireguardPort: this.wireguardPort(),
        transport: r.transport === 'tcp' ? 'tcp' : 'udp',
      });
      // Removed, moved or closed while it opened: not kept (a credential renewed meanwhile is for the next one).
      const now = this.#relay;
      if (this.#closed || !now || !sameServer(now, r)) {
        await proxy.close();
        return;
      }
      this.#proxy = proxy;
      this.log.info({ relay: r.id, relayed: proxy.relayedAddress, username: r.username }, 'relay allocation made');
      this.changed();
    } catch (e) {
      this.log.warn({ relay: r.id, err: oneLine(e) }, `relay allocation refused: asked again in ${RELAY_WATCH_MS / 1000} s`);
      if (this.#relay && sameServer(this.#relay, r)) this.#moveOn();
    } finally {
      this.#opening = false;
    }
  }

  async #lose(why: string): Promise<void> {
    const p = this.#proxy;
    if (!p) return;
    this.#proxy = null;
    this.log.warn({ relay: this.#relay?.id ?? '', why }, 'relay allocation gone');
    for (const r of p.peers) this.#remember(p.localOf(r));
    await p.close();
    this.changed();
  }

  async #watch(): Promise<void> {
    if (this.#closed || this.#opening) return;
    if (!this.#proxy) return void this.#open();
    if (!(await this.#proxy.alive())) {
      await this.#lose('the relay does not hold it any more');
      this.#moveOn();
    }
    if (!this.#proxy) await this.#open();
  }
}
