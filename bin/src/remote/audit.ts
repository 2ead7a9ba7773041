/** `meshp audit [--since] [--node] [--json]` (issue 28): the controller's audit log, read back. */
import { usage } from '@meshp/core/util';
import { say, table, type Out } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';
import { parseTtl } from './ops.js';

/** `--since`: an ISO time, or a duration back from now. */
export function sinceOf(since: string | undefined, now = Date.now()): string {
  if (since === undefined) return '';
  if (/^\d+\s*[smhd]?$/.test(since.trim())) return new Date(now - parseTtl(since) * 1000).toISOString();
  const t = Date.parse(since);
  if (Number.isNaN(t)) throw usage(`--since ${since} is neither a time (2026-12-02T07:00:00Z) nor a duration (90s, 30m, 12h, 7d)`);
  return new Date(t).toISOString();
}

export async function auditList(a: RemoteArgs & Out & { since?: string; node?: string; limit: number }): Promise<void> {
  if (!Number.isInteger(a.limit) || a.limit < 1 || a.limit > 1000) throw usage('--limit is a whole number 1..1000');
  const since = sinceOf(a.since);
  const r = await withAdmin(a, (c, network) => c.call('listAudit', { network, since, node: a.node ?? '', limit: a.limit }));
  const entries = r.entries.map((e) => ({ ...e, node: e.node || null }));
  say(
    a,
    { entries },
    entries.length
      ? table(
          ['AT', 'ACTOR', 'METHOD', 'NODE', 'VERSION', 'CHANGE'],
          entries.map((e) => [e.at, e.actor, e.method, e.node ?? '-', e.stateVersion, e.summary]),
        )
      : 'no admin changes recorded',
  );
}
