/**
 * A hand-driven agent for protocol tests over real gRPC: its own Ed25519 key, the transport's
 * link, core's DeltaApplier for the view; it says in its hello and acks whatever the test makes it
 * say (a wrong hash, a version it never applied), and records what the controller sends.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { Client, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import type { AgentMessage, ControllerMessage, EnrolResult, StateDelta, SyncChannel } from '@meshp/core';
import { challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { GrpcControlLink, channelOptions, fetchPinnedCertificate, pinnedCredentials } from '@meshp/transport-grpc';
import type { ControllerProc } from './grpc-procs.js';

export function fingerprintOf(ctl: ControllerProc): string {
  const line = ctl.proc.lines.find((l) => l.msg === 'controller serving');
  return String(line?.fingerprint);
}

export interface RawSession {
  ch: SyncChannel<ControllerMessage, AgentMessage>;
  deltas: StateDelta[];
  errors: { code: string; message: string }[];
  closed: Promise<{ code: string; message: string } | undefined>;
}

export class RawAgent {
  readonly applier = new DeltaApplier();
  readonly link: GrpcControlLink;
  readonly #key = generateKeyPairSync('ed25519');
  enrolment!: EnrolResult;

  constructor(readonly ctl: ControllerProc) {
    this.link = new GrpcControlLink({ address: ctl.address, fingerprint: fingerprintOf(ctl) });
  }

  get nodeKey(): string {
    return this.#key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  }

  async enrol(token: string, node: string, tunnelKey?: string): Promise<EnrolResult> {
    this.enrolment = await this.link.enrol({ token, nodeKey: this.nodeKey, node, endpoints: [], ...(tunnelKey ? { tunnelKey } : {}) });
    return this.enrolment;
  }

  /**
   * Opens a stream; its hello says `hello()` (default: the applier's version and hash). Every delta
   * is applied and answered with `ack(version, realHash)` (default: the real hash).
   */
  sign(payload: Uint8Array): Uint8Array {
    return sign(null, payload, this.#key.privateKey);
  }

  open(
    o: {
      hello?: () => { appliedVersion: number; stateHash: string; versionSignature?: Uint8Array };
      ack?: (version: number, hash: string) => string | null;
      /** Says in its hello that it takes expiry and rekey messages (issue 28), handed to `other`. */
      expiryAware?: boolean;
      other?: (m: Extract<ControllerMessage, { expiry: unknown } | { rekey: unknown }>) => void;
    } = {},
  ): RawSession {
    const ch = this.link.sync();
    const s: RawSession = { ch, deltas: [], errors: [], closed: new Promise((resolve) => ch.onClose(resolve)) };
    ch.onMessage((m) => {
      if ('challenge' in m) {
        const h = o.hello?.() ?? this.applier.hello();
        const signature = sign(null, challengePayload(this.enrolment.node, m.challenge), this.#key.privateKey);
        ch.send({
          hello: {
            node: this.enrolment.node,
            credential: this.enrolment.credential,
            appliedVersion: h.appliedVersion,
            stateHash: h.stateHash,
            revision: 1,
            signature,
            ...(sig(h) ? { versionSignature: sig(h)! } : {}),
            ...(o.expiryAware ? { expiryAware: true } : {}),
          },
        });
      } else if ('error' in m) s.errors.push(m.error);
      else if ('expiry' in m || 'rekey' in m) o.other?.(m);
      else {
        s.deltas.push(m.delta);
        const r = this.applier.receive(m.delta);
        if (r.status !== 'applied') return;
        const hash = o.ack ? o.ack(r.ack.appliedVersion, r.ack.stateHash) : r.ack.stateHash;
        if (hash !== null) ch.send({ ack: { appliedVersion: r.ack.appliedVersion, stateHash: hash } });
      }
    });
    return s;
  }
}

/** Writes raw bytes on the Sync stream (no protobuf encoding): what the controller answers. */
export async function garbageOnSync(ctl: ControllerProc, bytes: Buffer): Promise<{ code: number; details: string }> {
  const fingerprint = fingerprintOf(ctl);
  const pem = await fetchPinnedCertificate(ctl.address, fingerprint);
  const client = new Client(ctl.address, pinnedCredentials(pem, fingerprint), {
    ...channelOptions(4 << 20),
    'grpc.ssl_target_name_override': 'meshp-controller',
  });
  try {
    return await new Promise((resolve) => {
      const call: ClientDuplexStream<Buffer, Buffer> = client.makeBidiStreamRequest(
        '/meshp.v1.ControlService/Sync',
        (b: Buffer) => b,
        (b: Buffer) => b,
        new Metadata(),
      );
      call.on('data', () => undefined);
      call.on('error', (e: { code: number; details: string }) => resolve({ code: e.code, details: e.details }));
      call.on('end', () => resolve({ code: 0, details: '' }));
      call.write(bytes);
    });
  } finally {
    client.close();
  }
}

const sig = (h: object): Uint8Array | undefined => (h as { versionSignature?: Uint8Array }).versionSignature;
