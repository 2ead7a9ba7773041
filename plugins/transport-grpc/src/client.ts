/** The agent's side of the Control service over gRPC, TLS pinned to the controller's fingerprint. */
import { Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import type { AgentMessage, ConnectOptions, ControlLink, ControllerMessage, EnrolInput, EnrolResult, SyncChannel } from '@meshp/core';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import { agentToWire, controllerFromWire, enrolFromWire } from './codec.js';
import { ControlServiceClient, type SyncRequest, type SyncResponse } from '@meshp/protocol';
import { StreamChannel } from './channel.js';
import { channelOptions } from './options.js';
import { PINNED_NAME, fetchPinnedCertificate, pinnedCredentials } from './pin.js';
import { fromStatus, transportError } from './status.js';

const ENROL_DEADLINE_MS = 15_000;

export class GrpcControlLink implements ControlLink {
  readonly #o: ConnectOptions;
  #client: Promise<ControlServiceClient> | null = null;
  #closed = false;

  constructor(options: ConnectOptions) {
    this.#o = options;
  }

  /** The pinned client, made on first use; a failed pin or an unreachable controller is tried again next time. */
  #connect(): Promise<ControlServiceClient> {
    if (!this.#client) {
      const { address, fingerprint, maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES } = this.#o;
      this.#client = fetchPinnedCertificate(address, fingerprint).then(
        (pem) =>
          new ControlServiceClient(address, pinnedCredentials(pem, fingerprint), {
            ...channelOptions(maxMessageBytes),
            'grpc.ssl_target_name_override': PINNED_NAME,
          }),
      );
      this.#client.catch(() => {
        this.#client = null;
      });
    }
    return this.#client;
  }

  async enrol(input: EnrolInput): Promise<EnrolResult> {
    const client = await this.#connect();
    return new Promise((resolve, reject) => {
      client.enrol({ ...input, tunnelKey: input.tunnelKey ?? '' }, new Metadata(), { deadline: Date.now() + ENROL_DEADLINE_MS }, (err, res) => {
        if (err) reject(fromStatus(err));
        else resolve(enrolFromWire(res));
      });
    });
  }

  sync(): SyncChannel<ControllerMessage, AgentMessage> {
    const ch = new StreamChannel<ControllerMessage, AgentMessage, SyncResponse, SyncRequest>(
      { in: controllerFromWire, out: agentToWire },
      transportError,
      (s) => (s as unknown as ClientDuplexStream<SyncRequest, SyncResponse>).cancel(),
    );
    this.#connect().then(
      (client) => {
        if (this.#closed) ch.close({ code: 'MESHP_UNAVAILABLE', message: 'the link is closed' });
        else ch.attach(client.sync());
      },
      (e) => ch.close(transportError(e)),
    );
    return ch;
  }

  close(): void {
    this.#closed = true;
    this.#client?.then(
      (c) => c.close(),
      () => undefined,
    );
  }
}
