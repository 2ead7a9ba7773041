/**
 * A PostgreSQL 15 cluster of the test's own: initdb in a temp folder owned by the `postgres` user,
 * a postmaster that listens only on a unix socket in that folder (no TCP), trust for local
 * connections. Stopped (pg_ctl stop -D on its own folder, then its pid if still there) and removed
 * in t.teardown, also when the test fails.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';

export const PG_BIN = '/usr/lib/postgresql/15/bin';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Why PostgreSQL tests cannot run here, or null. */
export function postgresMissing(): string | null {
  if (!existsSync(join(PG_BIN, 'initdb'))) return `PostgreSQL 15 is not installed (${PG_BIN}; the Makefile's APT_PKGS has postgresql-15)`;
  if (spawnSync('id', ['-u', 'postgres']).status !== 0) return 'no postgres user (installed with postgresql-15)';
  if (process.getuid?.() !== 0) return 'the cluster is made as the postgres user: the test runs as root';
  return null;
}

export interface PgCluster {
  dir: string;
  /** postgres://… on the unix socket, to the database `db`. */
  url(db?: string): string;
  /** A database of its own (CREATE DATABASE). */
  createDb(name: string): Promise<string>;
  /** One statement's rows, on its own connection. */
  query<T extends Record<string, unknown> = Record<string, unknown>>(db: string, sql: string, values?: unknown[]): Promise<T[]>;
  /** Stopped as by a crash (`pg_ctl stop -m immediate`): every connection is cut, nothing is shut down cleanly. */
  stop(): void;
  /** Started again on the same folder (after stop). */
  start(): void;
}

export interface PgOptions {
  /** Run the postmaster inside this namespace, listening on TCP there as well (127.0.0.1:5432 in it). */
  ns?: { path: string };
}

const asPostgres = (cmd: string, args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });

/** Whether the postgres user can reach into `dir` (every folder above it searchable by others). */
function reachable(dir: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (dirname(d) === d) return true;
  }
}

export function startPostgres(t: Teardown, o: PgOptions = {}): PgCluster {
  // A TMPDIR under root's home is out of the postgres user's reach: /tmp then.
  const dir = mkdtempSync(join(reachable(tmpdir()) ? tmpdir() : '/tmp', 'meshp-pg-'));
  const data = join(dir, 'data');
  let pid: number | null = null;
  const stop = () => {
    if (existsSync(join(data, 'postmaster.pid'))) {
      try {
        asPostgres(join(PG_BIN, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '30']);
      } catch {
        // told by its pid below
      }
    }
    if (pid !== null) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
      // Never told again: the number may be another process's by then.
      pid = null;
    }
  };
  t.teardown(() => {
    stop();
    rmSync(dir, { recursive: true, force: true });
  });
  chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString().trim()), Number(execFileSync('id', ['-g', 'postgres']).toString().trim()));
  asPostgres(join(PG_BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  // Only the unix socket in the test's folder (and, in a namespace of the test's, TCP on its loopback); fsync off (a test cluster: speed, not durability).
  const listen = o.ns ? '127.0.0.1' : '';
  const pgCtl = join(PG_BIN, 'pg_ctl');
  const start = () => {
    const args = [
      'start',
      '-D',
      data,
      '-w',
      '-t',
      '60',
      '-l',
      join(dir, 'log'),
      '-o',
      `-c listen_addresses='${listen}' -k ${dir} -c fsync=off -c max_connections=50`,
    ];
    if (o.ns)
      execFileSync('nsenter', [`--net=${o.ns.path}`, '--', 'runuser', '-u', 'postgres', '--', pgCtl, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 120_000,
      });
    else asPostgres(pgCtl, args);
    pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  };
  start();
  const url = (db = 'postgres') => `postgres://postgres@/${db}?host=${encodeURIComponent(dir)}`;
  const query = async <T extends Record<string, unknown>>(db: string, sql: string, values: unknown[] = []) => {
    const c = new pg.Client({ connectionString: url(db) });
    await c.connect();
    try {
      return (await c.query(sql, values)).rows as T[];
    } finally {
      await c.end();
    }
  };
  return {
    dir,
    url,
    createDb: async (name) => {
      await query('postgres', `CREATE DATABASE ${name}`);
      return url(name);
    },
    query,
    stop,
    start,
  };
}
