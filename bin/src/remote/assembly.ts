/**
 * The default agent: the host's default plugins plus the gRPC transport. `--firewall none` loads no
 * firewall plugin at all, so nothing probes or touches the machine's firewall.
 */
import type { HostOptions, Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { GrpcTransportPlugin } from '@meshp/transport-grpc';
import { defaultPlugins } from '../host/assembly.js';

export function agentPlugins(firewall: string): Plugin[] {
  const plugins = defaultPlugins().filter((p) => firewall !== 'none' || !p.name.startsWith('firewall-'));
  return [...plugins, new GrpcTransportPlugin()];
}

export function assembleAgentHost(options: Partial<HostOptions>, plugins: Plugin[] = agentPlugins(options.firewall ?? 'auto')): Host {
  return new Host(options).use(...plugins);
}
