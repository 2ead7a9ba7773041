/**
 * The default assembly of a host: the plugins `meshp host` and `meshp agent` load.
 * An operator building their own agent lists their own (see examples/agent).
 */
import { Host, type HostOptions, type Plugin } from '@meshp/core';
import { LocalFilesPlugin } from '@meshp/files-local';
import { DockerPlugin } from '@meshp/runtime-docker';
import { SqliteStatePlugin } from '@meshp/state-sqlite';

export function defaultPlugins(): Plugin[] {
  return [new SqliteStatePlugin(), new LocalFilesPlugin(), new DockerPlugin()];
}

export function assembleHost(options: Partial<HostOptions>, plugins: Plugin[] = defaultPlugins()): Host {
  return new Host(options).use(...plugins);
}
