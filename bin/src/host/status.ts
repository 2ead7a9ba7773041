import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { printJson, refuse } from '../output.js';
import { renderReport } from './render.js';

/** The local node's last report: mode, firewall kind, every resource and its state. */
export async function hostStatus(args: { state: string; json: boolean }): Promise<void> {
  if (!existsSync(join(args.state, 'host.db'))) {
    refuse(new MeshpError('MESHP_NOT_FOUND', `no host state in ${args.state}: run meshp host apply first`));
  }
  const store = new SqliteHostStore(args.state);
  try {
    const [last] = await store.lastReports(1);
    if (!last) refuse(new MeshpError('MESHP_NOT_FOUND', `no report yet in ${args.state}: run meshp host apply first`));
    if (args.json) printJson(last.report);
    else process.stdout.write(`${renderReport(last.report)}\n`);
  } finally {
    await store.close();
  }
}
