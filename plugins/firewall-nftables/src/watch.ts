/**
 * `nft -j monitor`: calls back, debounced, when someone else changes tables or rules
 * (a reload, a reboot's load). Our own marked rules, the mesh's tables and the anonymous
 * sets our rules carry are not news.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { DERIVED_TABLE, MARK, MESH_TABLE, TUNNEL_TABLE_PREFIX } from './classify.js';
import type { Spawner } from './runner.js';

export function isOurEvent(event: Record<string, Record<string, Record<string, unknown>>>): boolean {
  const op = Object.keys(event)[0];
  const inner = op ? event[op] : undefined;
  const kind = inner ? Object.keys(inner)[0] : undefined;
  const body = kind ? inner![kind] : undefined;
  if (!body) return true;
  if (typeof body.comment === 'string' && body.comment.startsWith(MARK)) return true;
  const table = kind === 'table' ? body.name : body.table;
  if (body.family === 'inet' && (table === MESH_TABLE || table === DERIVED_TABLE || String(table).startsWith(TUNNEL_TABLE_PREFIX))) return true;
  if ((kind === 'set' || kind === 'element') && typeof body.name === 'string' && body.name.startsWith('__set')) return true;
  return false;
}

/**
 * The monitor ends with the process that started it, also when that one is killed (SIGKILL runs no
 * handler that would end it, and it went on as an orphan of init): util-linux's setpriv gives it
 * the parent-death signal, then becomes nft (one process, the same pid).
 */
const ENDS_WITH_PARENT = existsSync('/usr/bin/setpriv') ? ['/usr/bin/setpriv', '--pdeathsig', 'KILL'] : [];

export function watchRuleset(spawner: Spawner, bin: string, onChange: () => void, debounceMs = 200): { close(): void; readonly pid: number | undefined } {
  const child: ChildProcess = spawner([...ENDS_WITH_PARENT, bin, '-j', 'monitor']);
  let timer: NodeJS.Timeout | undefined;
  let buffer = '';
  let closed = false;
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      let event: unknown;
      try {
        event = JSON.parse(line);
      } catch {
        continue;
      }
      if (typeof event !== 'object' || event === null || isOurEvent(event as never)) continue;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        if (!closed) onChange();
      }, debounceMs);
    }
  });
  child.on('error', () => undefined);
  return {
    pid: child.pid,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      if (child.pid === undefined || child.exitCode !== null) return;
      try {
        process.kill(child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    },
  };
}
