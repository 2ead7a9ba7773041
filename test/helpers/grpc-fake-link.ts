/**
 * An in-memory ControlLink for agent unit tests: the test plays the controller's end of every
 * stream (with a real Controller behind it when it wants one). No sockets.
 */
import type { AgentMessage, ControlLink, ControllerMessage, EnrolInput, EnrolResult, SyncChannel, TransportError } from '@meshp/core';

export class FakeChannel implements SyncChannel<ControllerMessage, AgentMessage> {
  readonly sent: AgentMessage[] = [];
  closed = false;
  #onMessage: ((m: ControllerMessage) => void)[] = [];
  #onClose: ((e?: TransportError) => void)[] = [];
  #waiters: (() => void)[] = [];

  send(message: AgentMessage): void {
    if (this.closed) return;
    this.sent.push(message);
    for (const w of this.#waiters.splice(0)) w();
  }
  onMessage(fn: (m: ControllerMessage) => void): void {
    this.#onMessage.push(fn);
  }
  onClose(fn: (e?: TransportError) => void): void {
    this.#onClose.push(fn);
  }
  close(error?: TransportError): void {
    if (this.closed) return;
    this.closed = true;
    for (const fn of this.#onClose) fn(error);
  }

  /** The controller's side: deliver a message to the agent. */
  deliver(m: ControllerMessage): void {
    for (const fn of this.#onMessage) fn(m);
  }

  of<K extends 'hello' | 'ack' | 'report' | 'resync'>(kind: K): Extract<AgentMessage, Record<K, unknown>>[K][] {
    return this.sent.filter((m) => kind in m).map((m) => (m as Record<K, unknown>)[kind]) as Extract<AgentMessage, Record<K, unknown>>[K][];
  }

  async waitFor<K extends 'hello' | 'ack' | 'report' | 'resync'>(
    kind: K,
    count = 1,
    timeoutMs = 5_000,
  ): Promise<Extract<AgentMessage, Record<K, unknown>>[K][]> {
    const deadline = Date.now() + timeoutMs;
    while (this.of(kind).length < count) {
      if (Date.now() > deadline) throw new Error(`no ${count} ${kind} message(s); sent: ${JSON.stringify(this.sent.map((m) => Object.keys(m)[0]))}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.of(kind);
  }
}

export class FakeLink implements ControlLink {
  readonly channels: FakeChannel[] = [];
  readonly enrolments: EnrolInput[] = [];
  closed = false;
  #waiters: (() => void)[] = [];

  constructor(private readonly answer: (input: EnrolInput) => EnrolResult) {}

  async enrol(input: EnrolInput): Promise<EnrolResult> {
    this.enrolments.push(input);
    return this.answer(input);
  }

  sync(): FakeChannel {
    const ch = new FakeChannel();
    this.channels.push(ch);
    for (const w of this.#waiters.splice(0)) w();
    return ch;
  }

  close(): void {
    this.closed = true;
  }

  async nextChannel(n: number, timeoutMs = 5_000): Promise<FakeChannel> {
    const deadline = Date.now() + timeoutMs;
    while (this.channels.length < n) {
      if (Date.now() > deadline) throw new Error(`the agent opened ${this.channels.length} stream(s), not ${n}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.channels[n - 1]!;
  }
}
