/**
 * What one connection may cost the controller (one HTTP/2 connection: the peer's address and
 * port): Sync streams open at once (an agent needs one; a reconnect may overlap the old one), and
 * hellos and resync requests in a window — a hello costs a signature check and, with another hash,
 * a snapshot; so does a resync. More is refused MESHP_RATE_LIMITED. A proxy that carries many
 * agents over one connection raises the streams (`streamsPerConnection`); the hellos and resyncs
 * allowed grow with it, per stream as for one agent's connection.
 */
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';

export const STREAMS_PER_CONNECTION = 4;
const HELLOS_PER_STREAM = 5;
const HELLO_WINDOW_MS = 60_000;
/** Resync requests one connection may send in a window; more ends the stream (MESHP_RATE_LIMITED). */
const RESYNCS_PER_WINDOW = 10;
const RESYNC_WINDOW_MS = 60_000;

/** `streamsPerConnection` as given, or MESHP_USAGE: a whole number of at least 1 (the CLI checks it before anything is made). */
export function checkStreamsPerConnection(k: number): number {
  if (!Number.isInteger(k) || k < 1) throw usage(`--streams-per-connection must be a whole number of at least 1, not ${k}`);
  return k;
}

interface Connection {
  open: number;
  hellos: number[];
  resyncs: number[];
}

export class ConnectionLimits {
  readonly #connections = new Map<string, Connection>();
  readonly #streamsPerConnection: number;
  /**
   * Streams opened since the connections without a stream were last forgotten: that looks at every
   * connection, so it is done once per as many opens as there are connections (O(1) an open, not
   * O(N): at 10,000 agents it was 5 ms a stream, and a removal's agent retries a few). An entry kept
   * longer changes nothing: its windows count only what is recent.
   */
  #opens = 0;

  constructor(streamsPerConnection: number) {
    this.#streamsPerConnection = checkStreamsPerConnection(streamsPerConnection);
  }

  /** A stream opening on `peer`'s connection: counted, with the call that uncounts it when it ends; or refused past the allowance. */
  open(peer: string): { closed: () => void } | { refused: MeshpError } {
    const now = Date.now();
    if (++this.#opens >= this.#connections.size) {
      this.#opens = 0;
      for (const [k, c] of this.#connections)
        if (c.open === 0 && !c.hellos.some((x) => x > now - HELLO_WINDOW_MS) && !c.resyncs.some((x) => x > now - RESYNC_WINDOW_MS)) this.#connections.delete(k);
    }
    const c = this.#connections.get(peer) ?? { open: 0, hellos: [], resyncs: [] };
    this.#connections.set(peer, c);
    if (c.open >= this.#streamsPerConnection)
      return { refused: new MeshpError('MESHP_RATE_LIMITED', `more than ${this.#streamsPerConnection} Sync streams open at once on one connection`) };
    c.open++;
    return { closed: () => c.open-- };
  }

  /** A hello on `peer`'s connection: refused past the window's allowance. */
  hello(peer: string): void {
    this.#count(peer, 'hellos', HELLOS_PER_STREAM * this.#streamsPerConnection, HELLO_WINDOW_MS, 'hellos');
  }

  /** A resync request on `peer`'s connection: refused past the window's allowance (a new stream does not reset it). */
  resync(peer: string): void {
    this.#count(peer, 'resyncs', Math.ceil((RESYNCS_PER_WINDOW * this.#streamsPerConnection) / STREAMS_PER_CONNECTION), RESYNC_WINDOW_MS, 'resync requests');
  }

  #count(peer: string, kind: 'hellos' | 'resyncs', max: number, windowMs: number, what: string): void {
    const c = this.#connections.get(peer);
    if (!c) return;
    const now = Date.now();
    c[kind] = [...c[kind].filter((x) => x > now - windowMs), now];
    if (c[kind].length > max) throw new MeshpError('MESHP_RATE_LIMITED', `more than ${max} ${what} in ${windowMs / 1000} s on one connection`);
  }
}
