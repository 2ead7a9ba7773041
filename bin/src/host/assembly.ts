/**
 * The default assembly of a host: the plugins `meshp host` and `meshp agent` load.
 * An operator building their own agent lists their own (see examples/agent).
 */
import type { HostOptions, Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { ProcFactsPlugin } from '@meshp/facts-proc';
import { LocalFilesPlugin } from '@meshp/files-local';
import { IptablesPlugin } from '@meshp/firewall-iptables';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { DockerPlugin } from '@meshp/runtime-docker';
import { SqliteStatePlugin } from '@meshp/state-sqlite';
import { loadPlugins, type PluginSpec } from '../plugins/load.js';

export function defaultPlugins(): Plugin[] {
  return [new SqliteStatePlugin(), new LocalFilesPlugin(), new DockerPlugin(), new NftablesPlugin(), new IptablesPlugin(), new ProcFactsPlugin()];
}

/** The default plugins, then the ones an operator asked for by name (`--plugin`, a config file). */
export async function assembleHostWith(options: Partial<HostOptions>, specs: PluginSpec[], base: Plugin[] = defaultPlugins()): Promise<Host> {
  return new Host(options).use(...base, ...(await loadPlugins(specs)));
}

export function assembleHost(options: Partial<HostOptions>, plugins: Plugin[] = defaultPlugins()): Host {
  return new Host(options).use(...plugins);
}
