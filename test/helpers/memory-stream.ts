/**
 * One end of a Sync stream in memory, for the controller's unit tests (the real SessionHub and
 * Controller, no socket): it answers the challenge with a signed hello and acks what it applies, as
 * an agent does; what crosses goes a microtask later, as over a socket.
 */
import { sign, type KeyObject } from 'node:crypto';
import type { AgentMessage, ControllerMessage, StateDelta, SyncChannel, TransportError } from '@meshp/core';
import { PROTOCOL_REVISION, challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';

export class MemoryStream implements SyncChannel<AgentMessage, ControllerMessage> {
  readonly #in: ((m: AgentMessage) => void)[] = [];
  readonly #closed: ((e?: TransportError) => void)[] = [];
  ended = false;
  /** Every delta (snapshots included) received, in order. */
  deltas: StateDelta[] = [];
  readonly applier = new DeltaApplier();

  constructor(
    readonly node: string,
    private readonly credential: string,
    private readonly key: KeyObject,
  ) {}

  send(m: ControllerMessage): void {
    if (this.ended) return;
    queueMicrotask(() => this.#agent(m));
  }
  onMessage(l: (m: AgentMessage) => void): void {
    this.#in.push(l);
  }
  onClose(l: (e?: TransportError) => void): void {
    this.#closed.push(l);
  }
  close(e?: TransportError): void {
    if (this.ended) return;
    this.ended = true;
    for (const l of this.#closed) l(e);
  }
  #say(m: AgentMessage): void {
    queueMicrotask(() => this.#in.forEach((l) => l(m)));
  }
  #agent(m: ControllerMessage): void {
    if ('challenge' in m) {
      const { appliedVersion, stateHash } = this.applier.hello();
      this.#say({
        hello: {
          node: this.node,
          credential: this.credential,
          appliedVersion,
          stateHash,
          revision: PROTOCOL_REVISION,
          signature: sign(null, challengePayload(this.node, m.challenge), this.key),
        },
      });
    } else if ('delta' in m) {
      this.deltas.push(m.delta);
      const r = this.applier.receive(structuredClone(m.delta));
      if (r.status === 'applied') this.#say({ ack: r.ack });
    }
  }
}
