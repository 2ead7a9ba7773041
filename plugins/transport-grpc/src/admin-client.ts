/** The operator's side of the Admin service: every call carries the admin credential. */
import { Client, Metadata } from '@grpc/grpc-js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import * as gen from '@meshp/protocol';
import { channelOptions } from './options.js';
import { PINNED_NAME, fetchPinnedCertificate, pinnedCredentials } from './pin.js';
import { fromStatus } from './status.js';

type Service = typeof gen.AdminServiceService;
type Method = keyof Service;
type Req<M extends Method> = Parameters<Service[M]['requestSerialize']>[0];
type Res<M extends Method> = ReturnType<Service[M]['responseDeserialize']>;

export interface AdminConnectOptions {
  address: string;
  fingerprint: string;
  credential: string;
  maxMessageBytes?: number;
  deadlineMs?: number;
}

export class AdminClient {
  readonly #client: Client;
  readonly #o: AdminConnectOptions;

  private constructor(client: Client, options: AdminConnectOptions) {
    this.#client = client;
    this.#o = options;
  }

  static async connect(options: AdminConnectOptions): Promise<AdminClient> {
    const pem = await fetchPinnedCertificate(options.address, options.fingerprint);
    const client = new Client(options.address, pinnedCredentials(pem, options.fingerprint), {
      ...channelOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
      'grpc.ssl_target_name_override': PINNED_NAME,
    });
    return new AdminClient(client, options);
  }

  call<M extends Method>(method: M, request: Partial<Req<M>>): Promise<Res<M>> {
    const def = gen.AdminServiceService[method];
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${this.#o.credential}`);
    const full = (gen as unknown as Record<string, { fromPartial(o: object): object }>)[def.path.split('/').pop()! + 'Request']!.fromPartial(request);
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        def.path,
        def.requestSerialize as (v: object) => Buffer,
        def.responseDeserialize as (b: Buffer) => Res<M>,
        full,
        metadata,
        { deadline: Date.now() + (this.#o.deadlineMs ?? 15_000) },
        (err, res) => (err ? reject(fromStatus(err)) : resolve(res as Res<M>)),
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}
