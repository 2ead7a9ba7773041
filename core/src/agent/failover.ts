/**
 * One ControlLink over several controller replicas (one shared store, one certificate, one pin).
 * A round tries each address once, in order from the one in use: a stream that ends before the
 * controller said anything (refused, unreachable, a pin mismatch) moves on to the next address at
 * once, inside the same channel; the agent sees the stream end only when the whole round failed, so
 * its jittered backoff falls between rounds, never between the addresses of one. A stream that was
 * open and is lost as unavailable (the replica died, a keepalive timed out) ends for the agent as
 * before and the next stream starts at the next address; one ended by the controller with a code
 * stays where it is (every replica would say the same).
 * Enrolment goes through the addresses in order too, but only past an unavailable one: a refusal
 * with a code (a spent token, an unknown network) is final and the token is never shown to another.
 */
import { isMeshpError } from '../errors.js';
import type { AgentLog } from './agent.js';
import type { AgentMessage, ControlLink, ControllerMessage, EnrolInput, EnrolResult, SyncChannel, TransportError } from '../contract/transport.js';

const UNAVAILABLE = 'MESHP_UNAVAILABLE';

export interface FailoverTarget {
  /** HOST:PORT, for the logs. */
  address: string;
  link: ControlLink;
}

export class FailoverLink implements ControlLink {
  readonly #targets: FailoverTarget[];
  readonly #log: AgentLog | undefined;
  #at = 0;
  /** The address of the last stream the controller opened (challenge received). */
  #on: string | null = null;

  constructor(targets: FailoverTarget[], log?: AgentLog) {
    if (targets.length === 0) throw new Error('a failover link needs at least one controller');
    this.#targets = targets;
    this.#log = log;
  }

  /** The address the next stream or enrolment starts at. */
  get address(): string {
    return this.#targets[this.#at]!.address;
  }

  async enrol(input: EnrolInput): Promise<EnrolResult> {
    let last: unknown;
    for (let i = 0; i < this.#targets.length; i++) {
      const { address, link } = this.#targets[this.#at]!;
      try {
        const r = await link.enrol(input);
        this.#log?.info({ controller: address }, 'enrolment answered');
        return r;
      } catch (e) {
        if (!isMeshpError(e, UNAVAILABLE) || this.#targets.length === 1) throw e;
        last = e;
        this.#advance(address, e);
      }
    }
    throw last;
  }

  sync(): SyncChannel<ControllerMessage, AgentMessage> {
    return new FailoverChannel(this.#targets.length, () => this.#open());
  }

  close(): void {
    for (const t of this.#targets) t.link.close();
  }

  /** A stream to the address in use; its end is told back through `ended`. */
  #open(): Attempt {
    const { address, link } = this.#targets[this.#at]!;
    return {
      channel: link.sync(),
      opened: () => {
        if (this.#on !== address) this.#log?.info({ controller: address, ...(this.#on ? { from: this.#on } : {}) }, 'on controller');
        this.#on = address;
      },
      ended: (opened, error) => {
        if (!opened || error?.code === UNAVAILABLE) this.#advance(address, error);
      },
    };
  }

  #advance(address: string, error: { code?: string; message?: string } | undefined): void {
    if (this.#targets.length === 1 || this.#targets[this.#at]!.address !== address) return;
    this.#at = (this.#at + 1) % this.#targets.length;
    this.#log?.warn({ controller: address, next: this.address, code: error?.code, err: error?.message }, 'controller unavailable; trying the next');
  }
}

interface Attempt {
  channel: SyncChannel<ControllerMessage, AgentMessage>;
  /** The controller spoke first (its challenge): the stream is open. */
  opened(): void;
  ended(opened: boolean, error: TransportError | undefined): void;
}

/** The agent's one stream: the inner streams of one round behind it, one at a time. */
class FailoverChannel implements SyncChannel<ControllerMessage, AgentMessage> {
  #inner!: SyncChannel<ControllerMessage, AgentMessage>;
  #tries = 0;
  #closing = false;
  #done = false;
  readonly #onMessage: ((m: ControllerMessage) => void)[] = [];
  readonly #onClose: ((e?: TransportError) => void)[] = [];

  constructor(
    private readonly round: number,
    private readonly open: () => Attempt,
  ) {
    this.#next();
  }

  #next(): void {
    this.#tries++;
    const a = this.open();
    const ch = a.channel;
    this.#inner = ch;
    let opened = false;
    ch.onMessage((m) => {
      if (!opened) a.opened();
      opened = true;
      for (const fn of this.#onMessage) fn(m);
    });
    ch.onClose((error) => {
      if (this.#closing) return this.#end(error);
      a.ended(opened, error);
      if (!opened && this.#tries < this.round) this.#next();
      else this.#end(error);
    });
  }

  #end(error?: TransportError): void {
    if (this.#done) return;
    this.#done = true;
    for (const fn of this.#onClose) fn(error);
  }

  send(message: AgentMessage): void {
    this.#inner.send(message);
  }

  onMessage(listener: (message: ControllerMessage) => void): void {
    this.#onMessage.push(listener);
  }

  onClose(listener: (error?: TransportError) => void): void {
    this.#onClose.push(listener);
  }

  close(error?: TransportError): void {
    this.#closing = true;
    this.#inner.close(error);
  }
}
