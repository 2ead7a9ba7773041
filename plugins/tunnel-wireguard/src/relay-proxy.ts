/**
 * A relayed path for one WireGuard peer without owning WireGuard's socket (issue 27, NetBird's
 * design): a UDP socket on loopback that the WireGuard peer's endpoint points at, and an allocation on
 * a TURN server (coturn) through which what WireGuard sends there goes to the peer's own relayed
 * address, and what comes from it goes back to WireGuard. Only WireGuard's datagrams cross it: the
 * relay carries ciphertext and holds no tunnel key. The TURN client is werift-ice's, not hand-written.
 *
 * Credentials are TURN REST API ones (coturn `use-auth-secret`): a username `EXPIRY:NAME` and its
 * HMAC-SHA1 under the server's secret, short-lived, made where the secret is (turnCredential).
 */
import { createHmac } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { createTurnClient, type TurnProtocol } from 'werift-ice';
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';

export interface TurnCredential {
  username: string;
  password: string;
  /** Unix seconds. */
  expires: number;
}

/** A TURN REST API credential for `name`, valid `ttlSeconds` from `nowS` (coturn `use-auth-secret`, `static-auth-secret`). */
export function turnCredential(secret: string, name: string, ttlSeconds: number, nowS = Math.floor(Date.now() / 1000)): TurnCredential {
  const expires = nowS + ttlSeconds;
  const username = `${expires}:${name}`;
  return { username, password: createHmac('sha1', secret).update(username).digest('base64'), expires };
}

export interface RelayProxyOptions {
  /** The TURN server, `IP:PORT`. */
  server: string;
  credential: Pick<TurnCredential, 'username' | 'password'>;
  /** The local WireGuard device's listen port (on loopback). */
  wireguardPort: number;
}

const hostPort = (s: string): [string, number] => {
  const m = /^(.+):(\d{1,5})$/.exec(s);
  if (!m) throw usage(`a relay address is IP:PORT, not ${JSON.stringify(s)}`);
  return [m[1]!.replace(/^\[|\]$/g, ''), Number(m[2])];
};

export class RelayProxy {
  #turn: TurnProtocol | null = null;
  #local: Socket | null = null;
  #peer: [string, number] | null = null;
  #wg: number;
  /** Datagrams relayed each way (what /metrics and tests can read). */
  readonly counts = { toRelay: 0, fromRelay: 0 };

  private constructor(wireguardPort: number) {
    this.#wg = wireguardPort;
  }

  /** An allocation on the server, and the loopback socket WireGuard's peer endpoint is set to. */
  static async open(o: RelayProxyOptions): Promise<RelayProxy> {
    const p = new RelayProxy(o.wireguardPort);
    try {
      p.#turn = await createTurnClient({ address: hostPort(o.server), username: o.credential.username, password: o.credential.password }, { transport: 'udp' });
    } catch (e) {
      throw new MeshpError(
        'MESHP_TUNNEL_FAILED',
        `no allocation on the relay ${o.server}: ${(e instanceof Error && e.message) || 'refused (a credential the server does not take, or no answer)'}`,
        { cause: e },
      );
    }
    const local = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      local.once('error', reject);
      local.bind(0, '127.0.0.1', () => resolve());
    });
    p.#local = local;
    // From WireGuard (only from its own port on loopback): to the peer's relayed address.
    local.on('message', (data, from) => {
      if (from.port !== p.#wg || !p.#peer || !p.#turn) return;
      p.counts.toRelay++;
      void p.#turn.sendData(data, p.#peer).catch(() => undefined);
    });
    // From the allocation (only from the peer's relayed address): to WireGuard.
    p.#turn.onData.subscribe((data, from) => {
      if (!p.#peer || from[0] !== p.#peer[0] || from[1] !== p.#peer[1]) return;
      p.counts.fromRelay++;
      local.send(data, p.#wg, '127.0.0.1');
    });
    return p;
  }

  /** This node's relayed address on the server (what the peer's proxy sends to). */
  get relayedAddress(): string {
    const a = this.#turn?.relayedAddress;
    return a ? `${a[0]}:${a[1]}` : '';
  }

  /** The endpoint the WireGuard peer is set to: this proxy's loopback socket. */
  get localEndpoint(): string {
    const a = this.#local?.address();
    return a ? `127.0.0.1:${a.port}` : '';
  }

  /** The peer's relayed address: from now on what WireGuard sends goes there, and only what it sends is let back. */
  connect(peerRelayed: string): void {
    this.#peer = hostPort(peerRelayed);
  }

  async close(): Promise<void> {
    this.#local?.close();
    this.#local = null;
    await this.#turn?.close().catch(() => undefined);
    this.#turn = null;
  }
}
