/**
 * An agent in this process, made of the project's client pieces (GrpcControlLink, core's
 * DeltaApplier) over real gRPC, with a no-op host: every delta is applied to the view and acked at
 * once. It reconnects when its stream ends (until closed), as the agent does. For transport tests
 * that need several agents without a process each. Given several addresses (controller replicas on
 * one database), it starts with the first and moves to the next each time its stream ends.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import type { EnrolResult, StateDelta, SyncChannel, ControllerMessage, AgentMessage } from '@meshp/core';
import { PROTOCOL_REVISION, challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { GrpcControlLink } from '@meshp/transport-grpc';

export class SimAgent {
  readonly applier = new DeltaApplier();
  readonly key = generateKeyPairSync('ed25519');
  link: GrpcControlLink;
  readonly #addresses: string[];
  #at = 0;
  enrolment: EnrolResult | null = null;
  deltas: StateDelta[] = [];
  streams = 0;
  /** The errors the controller sent on its streams (a refusal that ends the stream, or one it stays open after). */
  errors: { code: string; message: string }[] = [];
  #ch: SyncChannel<ControllerMessage, AgentMessage> | null = null;
  #closed = false;

  constructor(
    readonly name: string,
    address: string | string[],
    readonly fingerprint: string,
  ) {
    this.#addresses = Array.isArray(address) ? address : [address];
    this.link = new GrpcControlLink({ address: this.#addresses[0]!, fingerprint });
  }

  /** The controller address its link goes to now. */
  get address(): string {
    return this.#addresses[this.#at]!;
  }

  get nodeKey(): string {
    return this.key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  }

  /** `tunnelKey`: the WireGuard public key it enrols with (a tunnel member), none by default. */
  async enrol(token: string, tunnelKey?: string): Promise<void> {
    this.enrolment = await this.link.enrol({ token, nodeKey: this.nodeKey, node: this.name, endpoints: [], ...(tunnelKey ? { tunnelKey } : {}) });
  }

  open(): void {
    if (this.#closed) return;
    const ch = this.link.sync();
    this.#ch = ch;
    this.streams++;
    ch.onMessage((m) => {
      const e = this.enrolment!;
      if ('challenge' in m) {
        const { appliedVersion, stateHash } = this.applier.hello();
        ch.send({
          hello: {
            node: e.node,
            credential: e.credential,
            appliedVersion,
            stateHash,
            revision: PROTOCOL_REVISION,
            signature: sign(null, challengePayload(e.node, m.challenge), this.key.privateKey),
          },
        });
      } else if ('error' in m) {
        this.errors.push(m.error);
      } else if ('delta' in m) {
        this.deltas.push(m.delta);
        let r;
        try {
          r = this.applier.receive(structuredClone(m.delta));
        } catch (err) {
          ch.send({ resync: this.applier.resyncRequest(err) });
          return;
        }
        if (r.status === 'applied') ch.send({ ack: r.ack });
      }
    });
    ch.onClose(() => {
      if (this.#ch === ch) this.#ch = null;
      if (this.#closed) return;
      if (this.#addresses.length > 1) {
        this.link.close();
        this.#at = (this.#at + 1) % this.#addresses.length;
        this.link = new GrpcControlLink({ address: this.address, fingerprint: this.fingerprint });
      }
      setTimeout(() => this.open(), 200 + Math.random() * 200);
    });
  }

  /** Sends on the stream open now (a report, as the agent sends one); false when none is. */
  send(m: AgentMessage): boolean {
    if (!this.#ch) return false;
    this.#ch.send(m);
    return true;
  }

  close(): void {
    this.#closed = true;
    this.#ch?.close();
    this.link.close();
  }
}
