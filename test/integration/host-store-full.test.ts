/**
 * A full disk under the host's state folder (issue 24): a tmpfs the test mounts, filled by a file
 * of its own. The apply is refused MESHP_STORE_FULL naming host.db, not MESHP_STATE_CORRUPT; the
 * machine is unchanged (no declared file written, no held file modified, nothing of the host's own
 * removed); every record made before is intact; once the space is back the same apply goes through.
 * The records are durable before the machine is touched (ADR 0005): a refused recordOriginal or
 * recordIntent is followed by no write at all.
 */
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isMeshpError, type Declaration, type OriginalRecord } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { Reconciler } from '@meshp/core/reconcile';
import { LocalFilesPlugin } from '@meshp/files-local';
import { SqliteHostStore, SqliteStatePlugin } from '@meshp/state-sqlite';
import { meshpIn } from '../helpers/cli.js';
import { netns, runPrefix } from '../helpers/netns.js';
import { canMount, tmpfs } from '../helpers/tmpfs.js';
import type { Subtest } from '../helpers/tap-types.js';

if (!canMount()) {
  t.plan(0, 'needs root to mount a tmpfs');
  process.exit(0);
}

// The CLI probes the firewall of the machine it runs on: it runs in a namespace of its own.
const ns = await netns(t, runPrefix('sf'));

const WEB = '/etc/web/web.conf';
const EXTRA = '/etc/web/extra.conf';
const DB = '/etc/db/db.conf';
const NEW = '/etc/db/new.conf';
const FOUND_WEB = Buffer.from([0x70, 0x72, 0x65, 0x00, 0xff, 0x0a]); // a predecessor's bytes, kept byte for byte
const FOUND_DB = Buffer.from('predecessor db\n');

const decl = (modules: Declaration['modules']): Declaration => ({ apiVersion: 'meshp/v1', node: 'n1', mode: 'adopted', settings: { ports: {} }, modules });
/** The first apply: web.conf found and held, extra.conf the host's own. */
const FIRST = decl([
  {
    name: 'web',
    taken: false,
    files: [
      { path: WEB, content: 'mesh web\n' },
      { path: EXTRA, content: 'extra\n' },
    ],
  },
]);
/**
 * The apply the full disk meets: web taken (web.conf would be converged), db.conf found (its
 * original to record), new.conf to create, extra.conf no longer declared (the host's own: removed).
 */
const SECOND = decl([
  { name: 'web', taken: true, files: [{ path: WEB, content: 'mesh web\n' }] },
  {
    name: 'db',
    taken: false,
    files: [
      { path: DB, content: 'mesh db\n' },
      { path: NEW, content: 'new\n' },
    ],
  },
]);

function machine(t: Subtest) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-full-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const put = (p: string, b: Buffer) => {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), b);
  };
  put(WEB, FOUND_WEB);
  put(DB, FOUND_DB);
  const read = (p: string) => (existsSync(join(root, p)) ? readFileSync(join(root, p)) : null);
  return { dir, root, read };
}

async function originals(state: string): Promise<OriginalRecord[]> {
  const s = new SqliteHostStore(state);
  try {
    return await s.listOriginals();
  } finally {
    await s.close();
  }
}

/** The machine as the first apply left it: what a refused apply must leave as it is. */
function unchanged(t: Subtest, m: ReturnType<typeof machine>, what: string) {
  t.same(m.read(WEB), FOUND_WEB, `${what}: the held web.conf is not modified`);
  t.same(m.read(DB), FOUND_DB, `${what}: the found db.conf is not modified`);
  t.equal(m.read(NEW), null, `${what}: the declared new.conf is not written`);
  t.equal(m.read(EXTRA)?.toString(), 'extra\n', `${what}: the host's own extra.conf is not removed`);
}

t.test('meshp host apply on a full state folder: MESHP_STORE_FULL naming host.db, nothing changed; space back, it goes through', async (t) => {
  const m = machine(t);
  const disk = tmpfs(t, 1024);
  const state = join(disk.dir, 'state');
  const file = (name: string, d: Declaration) => {
    const f = join(m.dir, name);
    writeFileSync(f, JSON.stringify(d));
    return f;
  };
  const apply = (f: string) => meshpIn(ns, ['host', 'apply', '--state', state, '--root', m.root, '--declaration', f, '--yes']);
  const first = await apply(file('first.json', FIRST));
  t.equal(first.code, 0, first.err);
  const before = await originals(state);
  t.same(
    before.map((o) => o.key),
    [`file:${WEB}`],
  );

  disk.fill();
  const refused = await apply(file('second.json', SECOND));
  t.equal(refused.code, 1);
  t.match(
    refused.err,
    new RegExp(`^MESHP_STORE_FULL: ${join(state, 'host.db')}: the disk under it is full .*nothing in it changed`),
    'the code first, naming host.db',
  );
  t.notMatch(refused.err, /MESHP_STATE_CORRUPT/, 'a full disk is not damage');
  t.equal(refused.err.trim().split('\n').length, 1, 'one line');
  unchanged(t, m, 'refused');
  const status = await meshpIn(ns, ['host', 'status', '--state', state]);
  t.equal(status.code, 1, 'host status cannot open the store on a full disk either');
  t.match(status.err, /^MESHP_STORE_FULL: .*host\.db/);

  disk.free();
  t.same(await originals(state), before, 'the originals recorded before are intact, byte for byte');
  const through = await apply(file('second.json', SECOND));
  t.equal(through.code, 0, through.err);
  t.equal(m.read(WEB)?.toString(), 'mesh web\n', 'web taken: converged');
  t.same(m.read(DB), FOUND_DB, 'db.conf held');
  t.equal(m.read(NEW)?.toString(), 'new\n');
  t.equal(m.read(EXTRA), null, 'extra.conf, the host own and no longer declared, removed');
  const after = await originals(state);
  t.same(
    after.map((o) => o.key),
    [`file:${DB}`, `file:${WEB}`],
  );
  t.same(Buffer.from(after.find((o) => o.key === `file:${WEB}`)!.original), FOUND_WEB, "web.conf's original is the predecessor's bytes");
});

t.test('a host whose store is open when the disk fills: each refused record stops the apply before the machine is touched', async (t) => {
  const m = machine(t);
  const hosts: Host[] = [];
  const disk = tmpfs(t, 1024, async () => {
    for (const h of hosts) await h.close();
  });
  const stateDir = join(disk.dir, 'state');
  const host = () => {
    const h = new Host({ root: m.root, stateDir, firewall: 'auto' }).use(new SqliteStatePlugin(), new LocalFilesPlugin());
    hosts.push(h);
    return h;
  };
  const first = host();
  await new Reconciler(first).reconcile(FIRST);
  await first.close();
  const before = await originals(stateDir);

  const h = host();
  await h.state(); // open now, its files made while there is room: the writes below are what the full disk refuses
  disk.fill();
  const refusedAt = async (d: Declaration, method: string) => {
    const e = await new Reconciler(h).reconcile(d).then(
      () => null,
      (err: unknown) => err,
    );
    t.ok(isMeshpError(e, 'MESHP_STORE_FULL'), `refused MESHP_STORE_FULL (${String(e)})`);
    if (!isMeshpError(e)) return;
    t.match(e.message, new RegExp(`^${join(stateDir, 'host.db')}: the disk under it is full`));
    t.same(e.attribution, { plugin: 'state-sqlite', hook: `state.${method}` }, `at ${method}`);
  };

  // db.conf is found: its original is recorded before anything else, and refused.
  await refusedAt(SECOND, 'recordOriginal');
  unchanged(t, m, 'after the refused original');
  // Without db: web.conf taken is the first write, its intent refused; extra.conf's removal (the next
  // step) and new.conf never happen.
  await refusedAt(decl([SECOND.modules[0]!, { name: 'db', taken: true, files: [{ path: NEW, content: 'new\n' }] }]), 'recordIntent');
  unchanged(t, m, 'after the refused intent');

  disk.free();
  t.same(await originals(stateDir), before, 'the originals recorded before are intact');
  const r = await new Reconciler(h).reconcile(SECOND);
  t.same(r.failures, [], 'the same store, space back: the apply goes through');
  t.equal(m.read(WEB)?.toString(), 'mesh web\n');
  t.equal(m.read(NEW)?.toString(), 'new\n');
  t.same(m.read(DB), FOUND_DB);
});

t.test('each write host.db refuses on a full disk leaves what was recorded before as it was', async (t) => {
  let store: SqliteHostStore | null = null;
  const disk = tmpfs(t, 1024, () => store?.close());
  const stateDir = join(disk.dir, 'state');
  const s = (store = new SqliteHostStore(stateDir));
  const at = new Date(0).toISOString();
  const original = (key: string, b: Buffer): OriginalRecord => ({
    key,
    kind: 'file',
    module: 'web',
    original: b,
    fingerprint: `fp-${key}`,
    foundAt: at,
    lastFingerprint: `fp-${key}`,
    changedAt: null,
    identity: null,
  });
  const peer = (id: string) => ({ id, nodeKey: `k-${id}`, addresses: ['100.64.0.2'], tags: [], endpoints: [], inboundOnly: false });
  const report = (node: string) => ({ node, mode: 'adopted' as const, at, firewall: null, resources: [], counts: {} as never, facts: {} });
  await s.recordOriginal(original('file:/etc/held.conf', FOUND_WEB));
  await s.recordIntent({ key: 'file:/etc/a.conf', kind: 'file', module: 'web', digest: 'd1', at });
  await s.recordOwned({ key: 'file:/etc/b.conf', kind: 'file', module: 'web', digest: 'd2', at, identity: '1:2' });
  await s.saveReport(report('before'));
  await s.saveView({ network: 'n', version: 3, full: true, upsert: [peer('p1')], remove: [], components: {}, values: { 'agent.recent': [1] } });
  const snapshot = async () => ({
    originals: await s.listOriginals(),
    intents: await s.listIntents(),
    owned: await s.listOwned(),
    reports: await s.lastReports(5),
    view: await s.loadView(),
    recent: await s.getValue('agent.recent'),
  });
  const before = await snapshot();

  disk.fill();
  // A later sighting of the held file, with other bytes, writes nothing (the first original is kept): not refused either.
  await s.recordOriginal(original('file:/etc/held.conf', Buffer.from('later bytes')));
  const writes: [string, () => Promise<void>][] = [
    ['recordOriginal', () => s.recordOriginal(original('file:/etc/other.conf', Buffer.alloc(64 * 1024, 1)))],
    ['recordIntent', () => s.recordIntent({ key: 'file:/etc/a.conf', kind: 'file', module: 'web', digest: 'd9', at })],
    ['recordOwned', () => s.recordOwned({ key: 'file:/etc/a.conf', kind: 'file', module: 'web', digest: 'd9', at, identity: null })],
    ['saveReport', () => s.saveReport({ ...report('after'), facts: { big: 'x'.repeat(64 * 1024) } })],
    [
      'saveView',
      () => s.saveView({ network: 'n', version: 4, full: true, upsert: [peer('p2')], remove: [], components: {}, values: { 'agent.recent': [1, 2] } }),
    ],
  ];
  for (const [what, write] of writes) {
    const e = await write().then(
      () => null,
      (err: unknown) => err,
    );
    t.ok(isMeshpError(e, 'MESHP_STORE_FULL'), `${what}: MESHP_STORE_FULL (${String(e)})`);
    t.match(
      isMeshpError(e) ? e.message : '',
      new RegExp(`^${join(stateDir, 'host.db')}: the disk under it is full .*nothing in it changed`),
      `${what}: names host.db`,
    );
  }
  t.same(await snapshot(), before, 'read on the full disk: every record as it was');
  disk.free();
  t.same(await snapshot(), before, 'and once the space is back');
  await s.recordOriginal(original('file:/etc/other.conf', FOUND_DB));
  t.same((await s.listOriginals()).length, 2, 'the same store writes again');
});
