/**
 * Relayed paths for WireGuard peers without owning WireGuard's socket (issue 27, NetBird's design):
 * one allocation on a TURN server (coturn) per node, and per relayed peer a UDP socket on loopback
 * that the WireGuard peer's endpoint points at. What WireGuard sends to a peer's socket goes through
 * the allocation to that peer's own relayed address; what comes from that address goes back to
 * WireGuard from the peer's socket. Only WireGuard's datagrams cross it: the relay carries
 * ciphertext and holds no tunnel key. The TURN client is werift-ice's, not hand-written.
 *
 * Credentials are TURN REST API ones (coturn `use-auth-secret`): a username `EXPIRY:NAME` and its
 * HMAC-SHA1 under the server's secret, short-lived, made where the secret is (the controller,
 * core delta/controller/relays.ts). An allocation keeps the username it was made with: coturn
 * caches the session's key at its first authenticated request and answers a request on the same
 * allocation under another username 441 (RFC 8656: the same credentials for the allocation's life),
 * and does not look at the username's expiry again while the allocation lives. A renewed credential
 * is for the next allocation (relay-paths.ts).
 */
import { createSocket, type Socket } from 'node:dgram';
import { Message, TurnProtocol, classes, methods } from 'werift-ice';
// werift-ice's own transports (the package has no `exports` map; its index does not re-export them).
import { TcpTransport, UdpTransport } from 'werift-ice/lib/common/src/transport.js';
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';
import type { TurnCredential } from '@meshp/core/delta';

/** Made where the secret is (the controller); here for the lab. */
export { turnCredential, type TurnCredential } from '@meshp/core/delta';

/** The lifetime an allocation asks for (werift-ice refreshes it at 5/6 of what the server grants). */
const ALLOCATION_LIFETIME_S = 600;

export interface RelayProxyOptions {
  /** The TURN server, `IP:PORT`. */
  server: string;
  credential: Pick<TurnCredential, 'username' | 'password'>;
  /** The local WireGuard device's listen port (on loopback). */
  wireguardPort: number;
  /** udp (default) or tcp to the TURN server. */
  transport?: 'udp' | 'tcp';
}

const hostPort = (s: string): [string, number] => {
  const m = /^(.+):(\d{1,5})$/.exec(s);
  if (!m) throw usage(`a relay address is IP:PORT, not ${JSON.stringify(s)}`);
  return [m[1]!.replace(/^\[|\]$/g, ''), Number(m[2])];
};

interface PeerPath {
  socket: Socket;
  local: string;
  address: [string, number];
  counts: { toRelay: number; fromRelay: number };
}

export class RelayProxy {
  #turn: TurnProtocol | null = null;
  #wg: number;
  /** By the peer's relayed address (`IP:PORT`). */
  readonly #peers = new Map<string, PeerPath>();
  /** Datagrams relayed each way, over every peer (what /metrics and tests can read). */
  readonly counts = { toRelay: 0, fromRelay: 0 };

  private constructor(wireguardPort: number) {
    this.#wg = wireguardPort;
  }

  /** An allocation on the server (no peer yet: `peer` adds one). */
  static async open(o: RelayProxyOptions): Promise<RelayProxy> {
    const p = new RelayProxy(o.wireguardPort);
    // werift-ice's createTurnClient, but a refused or unanswered Allocate closes its socket: its own
    // leaves the socket open, one more each time a relay that is down is asked again.
    const server = hostPort(o.server);
    let turn: TurnProtocol | null = null;
    try {
      const transport = o.transport === 'tcp' ? await TcpTransport.init(server) : await UdpTransport.init('udp4');
      turn = new TurnProtocol(server, o.credential.username, o.credential.password, ALLOCATION_LIFETIME_S, transport);
      await turn.connectionMade();
      p.#turn = turn;
    } catch (e) {
      await turn?.close().catch(() => undefined);
      throw new MeshpError(
        'MESHP_TUNNEL_FAILED',
        `no allocation on the relay ${o.server}: ${(e instanceof Error && e.message) || 'refused (a credential the server does not take, or no answer)'}`,
        { cause: e },
      );
    }
    // From the allocation (only from a peer's relayed address): to WireGuard, from that peer's socket.
    p.#turn.onData.subscribe((data, from) => {
      const path = p.#peers.get(`${from[0]}:${from[1]}`);
      if (!path) return;
      path.counts.fromRelay++;
      p.counts.fromRelay++;
      path.socket.send(data, p.#wg, '127.0.0.1');
    });
    return p;
  }

  /** This node's relayed address on the server (what its peers' proxies send to). */
  get relayedAddress(): string {
    const a = this.#turn?.relayedAddress;
    return a ? `${a[0]}:${a[1]}` : '';
  }

  /**
   * The loopback endpoint the WireGuard peer whose relayed address is `peerRelayed` is set to; its
   * TURN permission is created now (so the peer's first packet is let in before this side sends).
   */
  async peer(peerRelayed: string): Promise<string> {
    const had = this.#peers.get(peerRelayed);
    if (had) return had.local;
    if (!this.#turn) throw new MeshpError('MESHP_TUNNEL_FAILED', 'the relay allocation is closed');
    const address = hostPort(peerRelayed);
    const socket = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    const path: PeerPath = { socket, local: `127.0.0.1:${socket.address().port}`, address, counts: { toRelay: 0, fromRelay: 0 } };
    this.#peers.set(peerRelayed, path);
    // From WireGuard (only from its own port on loopback): to the peer's relayed address.
    socket.on('message', (data, from) => {
      if (from.port !== this.#wg || !this.#turn) return;
      path.counts.toRelay++;
      this.counts.toRelay++;
      void this.#turn.sendData(data, address).catch(() => undefined);
    });
    await this.#turn.getPermission(address).catch(() => undefined);
    return path.local;
  }

  /** The peer's path closed: its socket goes, and its permission is no longer refreshed (it lapses on the server, RFC 8656: 300 s). */
  drop(peerRelayed: string): void {
    const path = this.#peers.get(peerRelayed);
    if (!path) return;
    path.socket.close();
    this.#peers.delete(peerRelayed);
  }

  /** The loopback endpoint made for that peer (`peer`), if any. */
  localOf(peerRelayed: string): string | undefined {
    return this.#peers.get(peerRelayed)?.local;
  }

  /** Whether `endpoint` is one of this proxy's loopback sockets, and what came back through it from the peer. */
  carried(endpoint: string): { toRelay: number; fromRelay: number } | null {
    for (const p of this.#peers.values()) if (p.local === endpoint) return { ...p.counts };
    return null;
  }

  /** The relayed peers, by their relayed address. */
  get peers(): string[] {
    return [...this.#peers.keys()];
  }

  /**
   * Whether the allocation is still held on the server: a Refresh answered within `timeoutMs`. A
   * server restarted has forgotten it (437 Allocation Mismatch), one down does not answer.
   */
  async alive(timeoutMs = 5_000): Promise<boolean> {
    return this.#refresh(600, timeoutMs);
  }

  /** A Refresh asking `lifetime` seconds (0: the allocation deleted, RFC 8656 §7.3), answered within `timeoutMs`. */
  async #refresh(lifetime: number, timeoutMs: number): Promise<boolean> {
    const turn = this.#turn;
    if (!turn) return false;
    const refresh = new Message(methods.REFRESH, classes.REQUEST);
    refresh.setAttribute('LIFETIME', lifetime);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const answered = turn.requestWithRetry(refresh, turn.server).then(
      () => true,
      () => false,
    );
    try {
      return await Promise.race([answered, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The allocation deleted on the server (a Refresh of lifetime 0), not left to lapse: the relay's
   * port and its permissions go at once (a removed node's relayed path leaves nothing behind on the
   * relay). A relay that does not answer within 2 s is left to forget it by itself.
   */
  async close(): Promise<void> {
    for (const k of [...this.#peers.keys()]) this.drop(k);
    await this.#refresh(0, 2_000).catch(() => false);
    await this.#turn?.close().catch(() => undefined);
    this.#turn = null;
  }
}
