import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { loadRecords, untakeStatus, UNTAKE_KEY } from '@meshp/core/reconcile';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { printJson, refuse } from '../output.js';
import { renderReport, renderUntakeStatus } from './render.js';

/** The local node's last report: mode, firewall kind, every resource and its state. */
export async function hostStatus(args: { state: string; json: boolean }): Promise<void> {
  if (!existsSync(join(args.state, 'host.db'))) {
    refuse(new MeshpError('MESHP_NOT_FOUND', `no host state in ${args.state}: run meshp host apply first`));
  }
  const store = new SqliteHostStore(args.state);
  try {
    const [last] = await store.lastReports(1);
    if (!last) refuse(new MeshpError('MESHP_NOT_FOUND', `no report yet in ${args.state}: run meshp host apply first`));
    const untake = untakeStatus(await loadRecords(store), await store.getValue(UNTAKE_KEY));
    if (args.json) printJson({ ...last.report, untake });
    else process.stdout.write(`${renderReport(last.report)}\n${renderUntakeStatus(untake)}`);
  } finally {
    await store.close();
  }
}
