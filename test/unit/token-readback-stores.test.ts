/**
 * Enrolment tokens read back and revoked (issue 33), in both stores of the hosting's tokens: the
 * SQLite AuthStore and store-postgres's (a PostgreSQL 15 cluster of the test's own:
 * helpers/postgres.ts). Listed by id (the start of the secret's hash), newest first; an unused token
 * revoked is never marked used after (so no Enrol takes it); a used one is refused MESHP_TOKEN_USED;
 * a store from before (SQLite without the columns, PostgreSQL at migration 3) gains them, its
 * tokens kept; copy-store carries the new columns.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { AuthStore, hashSecret, tokenId, type AuthBook } from '@meshp/controller';
import { MIGRATIONS, migrate, openPostgresStore } from '@meshp/store-postgres';
import { meshp } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import type { Subtest } from '../helpers/tap-types.js';

const FAR = '2099-01-01T00:00:00.000Z';
const token = (createdAt: string | null, tags: string[] = []) => ({
  network: 'n',
  mode: 'converged' as const,
  tags,
  fingerprint: 'f',
  expiresAt: FAR,
  ...(createdAt ? { createdAt } : {}),
});

function tmp(t: Subtest): string {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-tokens-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The same rules, whichever store: `a` and `b` are two handles on one store (two replicas for PostgreSQL). */
function rules(t: Subtest, a: AuthBook, b: AuthBook): void {
  a.putToken('s-old', token('2026-01-01T00:00:00.000Z', ['web']));
  a.putToken('s-new', token('2026-01-02T00:00:00.000Z'));
  a.putToken('s-used', token('2026-01-03T00:00:00.000Z'));
  a.putToken('s-elsewhere', { ...token('2026-01-04T00:00:00.000Z'), network: 'other' });
  t.equal(a.markUsed('s-used', 'm1', '2026-01-03T01:00:00.000Z', 'k1'), true);

  const list = b.listTokens('n');
  t.same(
    list.map((x) => x.id),
    ['s-used', 's-new', 's-old'].map((s) => tokenId(hashSecret(s))),
    "the network's tokens, newest first, by id",
  );
  t.equal(list[0]!.id.length, 16, 'an id is 16 hex digits of the hash');
  t.match(list[2], { tags: ['web'], createdAt: '2026-01-01T00:00:00.000Z', expiresAt: FAR, usedAt: null, revokedAt: null }, 'with its tags and times');
  t.match(list[0], { usedBy: 'm1', usedAt: '2026-01-03T01:00:00.000Z' }, 'a used one with who used it');
  t.notOk(JSON.stringify(list).includes('s-old'), 'never the secret');

  const id = tokenId(hashSecret('s-new'));
  const r = b.revokeToken('n', id, '2026-01-05T00:00:00.000Z');
  t.match(r, { revoked: true, token: { id, revokedAt: '2026-01-05T00:00:00.000Z' } }, 'an unused token revoked');
  t.equal(a.getToken('s-new')?.revokedAt, '2026-01-05T00:00:00.000Z', 'seen revoked through the other handle');
  t.equal(a.markUsed('s-new', 'm2', 'now', 'k2'), false, 'and never marked used after: no enrolment takes it');
  t.equal(a.getToken('s-new')?.usedAt, null, 'it stays unused');
  t.match(a.revokeToken('n', id, 'later'), { revoked: false, token: { revokedAt: '2026-01-05T00:00:00.000Z' } }, 'revoked again: nothing changes');
  t.throws(
    () => a.revokeToken('n', tokenId(hashSecret('s-used')), 'now'),
    { code: 'MESHP_TOKEN_USED', message: /used by node m1/ },
    'a used token is not revoked',
  );
  t.throws(() => a.revokeToken('n', 'ffffffffffffffff', 'now'), { code: 'MESHP_NOT_FOUND' }, 'an id that names no token');
  t.throws(() => a.revokeToken('n', tokenId(hashSecret('s-elsewhere')), 'now'), { code: 'MESHP_NOT_FOUND' }, "another network's token is not this network's");
  t.throws(() => a.revokeToken('n', 'not hex', 'now'), { code: 'MESHP_USAGE' }, 'an id that is not one');
  t.equal(a.getToken('s-old')?.revokedAt, null, 'another token is untouched');
}

t.test('SQLite AuthStore', async (t) => {
  const file = join(tmp(t), 'controller.db');
  const a = new AuthStore(file);
  const b = new AuthStore(file);
  t.teardown(() => {
    a.close();
    b.close();
  });
  rules(t, a, b);
});

t.test('SQLite: a state folder from before gains the columns, its tokens kept', async (t) => {
  const file = join(tmp(t), 'controller.db');
  const db = new Database(file);
  // hosting_tokens as it was made before issue 33 (with the columns atomic enrolment added).
  db.exec(`CREATE TABLE hosting_tokens (hash TEXT PRIMARY KEY, network TEXT NOT NULL, mode TEXT NOT NULL, tags TEXT NOT NULL, fingerprint TEXT NOT NULL,
    expires_at TEXT NOT NULL, used_at TEXT, used_by TEXT, used_key TEXT, confirmed_at TEXT)`);
  db.prepare("INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at) VALUES (?, 'n', 'converged', '[]', 'f', ?)").run(
    hashSecret('before'),
    FAR,
  );
  db.close();
  const a = new AuthStore(file);
  t.teardown(() => a.close());
  t.match(a.listTokens('n'), [{ id: tokenId(hashSecret('before')), createdAt: null, revokedAt: null }], 'the old token, with no creation time');
  t.match(a.revokeToken('n', tokenId(hashSecret('before')), 'now'), { revoked: true }, 'and it can be revoked');
});

const missing = postgresMissing();
t.test('PostgreSQL', { skip: missing ? `PostgreSQL tests need a cluster of their own: ${missing}` : false }, async (t) => {
  const cluster = startPostgres(t);
  const open = async (url: string) => {
    const s = await openPostgresStore(url);
    t.teardown(() => s.close());
    return s;
  };

  t.test('two replicas', async (t) => {
    const url = await cluster.createDb('tokens');
    const [a, b] = [await open(url), await open(url)];
    rules(t, a.auth, b.auth);
  });

  t.test('a database at migration 3 gains the columns (migration 4), its tokens kept', async (t) => {
    const url = await cluster.createDb('older');
    await migrate(
      url,
      MIGRATIONS.filter((m) => m.version <= 3),
    );
    await cluster.query(
      'older',
      "INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at) VALUES ($1, 'n', 'converged', '[]', 'f', $2)",
      [hashSecret('before'), FAR],
    );
    const s = await open(url);
    t.ok(s.migrated.includes(4), 'migration 4 applied');
    t.match(s.auth.listTokens('n'), [{ id: tokenId(hashSecret('before')), createdAt: null, revokedAt: null }], 'the old token');
  });

  t.test('copy-store carries when a token was made and revoked', async (t) => {
    const dir = tmp(t);
    const auth = new AuthStore(join(dir, 'controller.db'));
    auth.putToken('made', token('2026-02-01T00:00:00.000Z'));
    auth.revokeToken('n', tokenId(hashSecret('made')), '2026-02-02T00:00:00.000Z');
    auth.close();
    const url = await cluster.createDb('copied');
    const r = meshp('controller', 'copy-store', '--state', dir, '--to', url, '--json');
    t.equal(r.code, 0, `copied: ${r.err}`);
    const s = await open(url);
    t.match(s.auth.getToken('made'), { createdAt: '2026-02-01T00:00:00.000Z', revokedAt: '2026-02-02T00:00:00.000Z' }, 'both times, as they were');
    t.equal(s.auth.markUsed('made', 'x', 'now', 'k'), false, 'and revoked there too');
  });
});
