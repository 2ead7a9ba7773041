import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { RECENT_KEY, loadView } from '@meshp/core/agent';
import type { AppliedRecord } from '@meshp/core/delta';
import { loadRecords, untakeStatus, UNTAKE_KEY } from '@meshp/core/reconcile';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { printJson, refuse, table } from '../output.js';
import { dnsLine, renderUntakeStatus } from './render.js';

/** `meshp doctor --local --state DIR`: what this node applied, read from its own store, no controller needed. */
export async function doctorLocal(args: { state: string; json: boolean }): Promise<void> {
  if (!existsSync(join(args.state, 'host.db'))) refuse(new MeshpError('MESHP_NOT_FOUND', `no host state in ${args.state}`));
  const store = new SqliteHostStore(args.state);
  try {
    const view = (await loadView(store)).snapshot;
    const recent = (await store.getValue<AppliedRecord[]>(RECENT_KEY)) ?? [];
    const [last] = await store.lastReports(1);
    const held = last?.report.resources.filter((r) => r.state === 'held' || r.state === 'changed') ?? [];
    const doc = {
      appliedVersion: view?.toVersion ?? 0,
      mode: last?.report.mode ?? null,
      firewall: last?.report.firewall?.kind ?? null,
      lastReportAt: last?.at ?? null,
      recentDeltas: recent,
      held: held.map((r) => ({ key: r.key, module: r.module, state: r.state })),
      untake: untakeStatus(await loadRecords(store), await store.getValue(UNTAKE_KEY)),
      dns: last?.report.facts['dns'] ?? null,
    };
    const dns = last ? dnsLine(last.report.facts) : null;
    if (args.json) return printJson(doc);
    process.stdout.write(
      [
        `applied version ${doc.appliedVersion}, mode ${doc.mode ?? '?'}, firewall ${doc.firewall ?? '?'}, last report ${doc.lastReportAt ?? 'never'}`,
        'last deltas applied:',
        table(
          ['FROM', 'TO', 'UPSERTED', 'REMOVED', 'UNSCOPED', 'COMPONENTS', 'STATE HASH'],
          recent.map((d) => [d.fromVersion, d.toVersion, d.upserted, d.removed, d.unscoped, d.components.join(','), d.stateHash.slice(0, 12)]),
        ),
        `held resources: ${held.length}`,
        ...held.map((r) => `  ${r.key} (${r.module}) ${r.state}`),
        ...(dns ? [dns] : []),
      ].join('\n') + `\n${renderUntakeStatus(doc.untake)}`,
    );
  } finally {
    await store.close();
  }
}
