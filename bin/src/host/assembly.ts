/**
 * The default assembly of a host: the plugins `meshp host` and `meshp agent` load.
 * An operator building their own agent lists their own (see examples/agent).
 */
import { Host, type HostOptions, type Plugin } from '@meshp/core';
import { ProcFactsPlugin } from '@meshp/facts-proc';
import { LocalFilesPlugin } from '@meshp/files-local';
import { IptablesPlugin } from '@meshp/firewall-iptables';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { DockerPlugin } from '@meshp/runtime-docker';
import { SqliteStatePlugin } from '@meshp/state-sqlite';

export function defaultPlugins(): Plugin[] {
  return [
    new SqliteStatePlugin(),
    new LocalFilesPlugin(),
    new DockerPlugin(),
    new NftablesPlugin(),
    new IptablesPlugin(),
    new ProcFactsPlugin(),
  ];
}

export function assembleHost(options: Partial<HostOptions>, plugins: Plugin[] = defaultPlugins()): Host {
  return new Host(options).use(...plugins);
}
