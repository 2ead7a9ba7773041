import {
  PLUGIN_API_VERSION,
  type ConnectOptions,
  type ControlLink,
  type ListenOptions,
  type Plugin,
  type Transport,
  type TransportListener,
  type AdminHandler,
  type ControlHandlers,
  type Refused,
  type PluginHost,
} from '@meshp/core';
import { GrpcControlLink } from './client.js';
import { listen } from './server.js';

export class GrpcTransport implements Transport {
  readonly name = 'grpc';
  connect(options: ConnectOptions): ControlLink {
    return new GrpcControlLink(options);
  }
  listen(options: ListenOptions, services: { control: ControlHandlers; admin: AdminHandler; refused?: Refused }): Promise<TransportListener> {
    return listen(options, services);
  }
}

/** Provides the host's transport: the Control and Admin services over gRPC with pinned TLS. */
export class GrpcTransportPlugin implements Plugin {
  readonly name = 'transport-grpc';
  readonly apiVersion = PLUGIN_API_VERSION;
  apply(host: PluginHost): void {
    host.hooks.transport.tapPromise(this.name, async () => new GrpcTransport());
  }
}
