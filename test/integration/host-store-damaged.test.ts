/**
 * A damaged page in host.db (issue 24): found by SQLite's quick_check when the store opens, not
 * when some command happens to read that table. `meshp host status`, `host apply` and `meshp agent`
 * refuse with MESHP_STATE_CORRUPT naming the file and what quick_check said, in one line, before
 * anything is touched: no file written, no key made, host.db itself not written.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { meshpIn } from '../helpers/cli.js';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import type { Subtest } from '../helpers/tap-types.js';

// The CLI probes the firewall of the machine it runs on: in a namespace of its own when it can.
const ns = labAvailable() ? await netns(t, runPrefix('sd')) : null;
const WEB = '/etc/web/web.conf';
const EXTRA = '/etc/web/extra.conf';
const NEW = '/etc/web/new.conf';
const FOUND = Buffer.from('listen 8080\n# the predecessor wrote this\n');

const decl = (taken: boolean, files: { path: string; content: string }[]) => ({
  apiVersion: 'meshp/v1',
  node: 'n1',
  mode: 'adopted',
  settings: { ports: {} },
  modules: [{ name: 'web', taken, files }],
});

/** A node after one apply (web.conf held, extra.conf its own), its host.db then damaged by `damage`. */
async function damagedNode(t: Subtest, damage: (page: Buffer) => void) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-damaged-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const state = join(dir, 'state');
  mkdirSync(join(root, 'etc/web'), { recursive: true });
  writeFileSync(join(root, WEB), FOUND);
  const first = join(dir, 'first.json');
  writeFileSync(
    first,
    JSON.stringify(
      decl(false, [
        { path: WEB, content: 'mesh web\n' },
        { path: EXTRA, content: 'extra\n' },
      ]),
    ),
  );
  const r = await meshpIn(ns, ['host', 'apply', '--state', state, '--root', root, '--declaration', first, '--yes']);
  t.equal(r.code, 0, r.err);
  t.equal((await meshpIn(ns, ['host', 'status', '--state', state])).code, 0, 'host status reads the sound store');

  // The page the test picks: the root page of the originals table (where web.conf's original is),
  // never page 1 with the file's header. The CLI closed its store: the WAL is checkpointed into host.db.
  const file = join(state, 'host.db');
  t.notOk(existsSync(`${file}-wal`), 'no WAL left: every page is in host.db');
  const db = new Database(file, { readonly: true });
  const { rootpage } = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'originals'").get() as { rootpage: number };
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  db.close();
  t.ok(rootpage > 1, `originals is on page ${rootpage}`);
  const bytes = readFileSync(file);
  const page = bytes.subarray((rootpage - 1) * pageSize, rootpage * pageSize);
  t.equal(page[0], 0x0d, 'a leaf page of a table (its b-tree header says so)');
  damage(page);
  writeFileSync(file, bytes);
  const hash = () => createHash('sha256').update(readFileSync(file)).digest('hex');
  return { dir, root, state, file, hash: hash(), hashNow: hash };
}

/** One line, the code first, naming the file and what quick_check found. */
function refusedCorrupt(t: Subtest, r: { code: number | null; err: string }, file: string, what: string) {
  t.equal(r.code, 1, `${what}: refused`);
  t.match(
    r.err,
    new RegExp(`^MESHP_STATE_CORRUPT: ${file} is damaged \\(quick_check: [^)]+\\)`),
    `${what}: the code first, naming host.db and what quick_check said`,
  );
  t.equal(r.err.trim().split('\n').length, 1, `${what}: one line, no stack trace`);
}

t.test('cell pointers of a table page overwritten: status, apply and the agent refuse, touching nothing', async (t) => {
  // Past the 8-byte header of a leaf page: its cell pointer array, where its rows are.
  const n = await damagedNode(t, (page) => page.fill(0xff, 8, 14));

  const status = await meshpIn(ns, ['host', 'status', '--state', n.state]);
  refusedCorrupt(t, status, n.file, 'host status');
  // Which of the two SQLite says depends on where the rows landed on the page: a cell offset it
  // reads out of range, or a page it cannot walk at all (then quick_check itself fails).
  t.match(status.err, /out of range|database disk image is malformed/, 'quick_check says what it found: a cell offset out of range, or a page it cannot walk');

  const second = join(n.dir, 'second.json');
  // web taken: web.conf would be converged; new.conf created; extra.conf, no longer declared, removed.
  writeFileSync(
    second,
    JSON.stringify(
      decl(true, [
        { path: WEB, content: 'mesh web\n' },
        { path: NEW, content: 'new\n' },
      ]),
    ),
  );
  const apply = await meshpIn(ns, ['host', 'apply', '--state', n.state, '--root', n.root, '--declaration', second, '--yes']);
  refusedCorrupt(t, apply, n.file, 'host apply');
  t.same(readFileSync(join(n.root, WEB)), FOUND, 'the held file is not modified');
  t.notOk(existsSync(join(n.root, NEW)), 'the declared file is not written');
  t.equal(readFileSync(join(n.root, EXTRA), 'utf8'), 'extra\n', "the host's own file is not removed");

  const agent = await meshpIn(ns, ['agent', '--state', n.state, '--controller', '127.0.0.1:9', '--root', n.root], 60_000);
  refusedCorrupt(t, agent, n.file, 'meshp agent');
  t.notOk(existsSync(join(n.state, 'node.key')), 'the agent made no key: it stopped at the store');
  t.equal(n.hashNow(), n.hash, 'host.db itself was not written by any of them');
});

t.test("a table page's header destroyed: quick_check itself fails, and that is what the refusal says", async (t) => {
  const n = await damagedNode(t, (page) => page.fill(0xff, 0, 8));
  const status = await meshpIn(ns, ['host', 'status', '--state', n.state]);
  refusedCorrupt(t, status, n.file, 'host status');
  t.match(status.err, /quick_check: SQLITE_CORRUPT: database disk image is malformed/);
  t.equal(n.hashNow(), n.hash);
});
