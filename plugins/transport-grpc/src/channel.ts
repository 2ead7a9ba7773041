/** A SyncChannel over a gRPC duplex stream, for either end. Closes once; later sends are dropped. */
import type { SyncChannel, TransportError } from '@meshp/core';

interface Duplex<W> {
  write(message: W): boolean;
  end(): void;
  on(event: 'data', fn: (m: unknown) => void): unknown;
  on(event: 'error', fn: (e: unknown) => void): unknown;
  on(event: 'end' | 'close', fn: () => void): unknown;
}

export class StreamChannel<In, Out, WireIn, WireOut> implements SyncChannel<In, Out> {
  #stream: Duplex<WireOut> | null = null;
  /** What was sent before the stream was attached; none after (not kept for the stream's life). */
  #queue: Out[] | null = [];
  #closed = false;
  #onMessage: ((m: In) => void)[] = [];
  #onClose: ((e?: TransportError) => void)[] = [];

  constructor(
    private readonly codec: { in: (w: WireIn) => In; out: (m: Out) => WireOut },
    private readonly mapError: (e: unknown) => TransportError,
    private readonly fail: (stream: Duplex<WireOut>, e: TransportError) => void,
  ) {}

  attach(stream: Duplex<WireOut>): void {
    if (this.#closed) {
      stream.end();
      return;
    }
    this.#stream = stream;
    stream.on('data', (w) => {
      let m: In;
      try {
        m = this.codec.in(w as WireIn);
      } catch (e) {
        this.close(this.mapError(e));
        return;
      }
      for (const fn of this.#onMessage) fn(m);
    });
    stream.on('error', (e) => this.#ended(this.mapError(e)));
    stream.on('end', () => this.#ended());
    stream.on('close', () => this.#ended());
    const queued = this.#queue ?? [];
    this.#queue = null;
    for (const m of queued) stream.write(this.codec.out(m));
  }

  send(message: Out): void {
    if (this.#closed) return;
    if (this.#stream) this.#stream.write(this.codec.out(message));
    else this.#queue?.push(message);
  }

  onMessage(listener: (message: In) => void): void {
    this.#onMessage.push(listener);
  }

  onClose(listener: (error?: TransportError) => void): void {
    this.#onClose.push(listener);
  }

  close(error?: TransportError): void {
    if (this.#closed) return;
    const s = this.#stream;
    if (s) {
      if (error) this.fail(s, error);
      else s.end();
    }
    this.#ended(error);
  }

  #ended(error?: TransportError): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const fn of this.#onClose) fn(error);
  }
}
