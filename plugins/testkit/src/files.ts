/**
 * The file-store conformance suite: what every `files` provider promises (`@meshp/core`'s
 * FileStore), checked on a real file system in a temporary root the kit makes and removes. The store
 * is asked for through a Host, as the agent asks for it, so the plugin's own wiring is tested too.
 * Each check gets a fresh root.
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isMeshpError, type FileStore, type Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import type { KitTest } from './kit-test.js';

export interface FileStoreKitSpec {
  /** A fresh plugin that provides `files` for the host's root (its options as a user would give them). */
  plugin(): Plugin;
}

interface Bed {
  root: string;
  /** A folder beside the root: what the store must never reach. */
  outside: string;
  store: FileStore;
  plugin: string;
}

async function bed(t: KitTest, spec: FileStoreKitSpec): Promise<Bed> {
  const base = mkdtempSync(join(tmpdir(), 'meshp-kit-files-'));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  const plugin = spec.plugin();
  const host = new Host({ root, stateDir: join(base, 'state') }).use(plugin);
  t.teardown(() => host.close());
  const store = await host.files();
  if (!store) throw new Error(`plugin ${plugin.name} provided no file store`);
  return { root, outside, store, plugin: plugin.name };
}

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const put = (root: string, p: string, content: string) => {
  mkdirSync(dirname(join(root, p)), { recursive: true });
  writeFileSync(join(root, p), content);
};

/** The refusal's code, or what was not a refusal. */
async function codeOf(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
    return 'no error';
  } catch (e) {
    return isMeshpError(e) ? e.code : `not a MeshpError: ${String(e)}`;
  }
}

/** Registers one check as a subtest, on a bed of its own. */
type Check = (name: string, fn: (t: KitTest, b: Bed) => Promise<void>) => unknown;

/** Bytes and modes written and read back, under the root. */
function readWriteChecks(check: Check): void {
  check('provided for the host root; an absent file reads as null', async (t, b) => {
    t.ok(b.store.root === b.root || b.store.root.endsWith(b.root), `the store's root is the host's (${b.store.root})`);
    t.equal(await b.store.read('/etc/absent.conf'), null, 'absent → null');
  });

  check('write then read: the bytes and the mode, under the root only', async (t, b) => {
    await b.store.write('/etc/app/app.conf', bytes('one\n'), 0o640);
    t.equal(readFileSync(join(b.root, 'etc/app/app.conf'), 'utf8'), 'one\n', 'written under the root, parents made');
    t.equal(statSync(join(b.root, 'etc/app/app.conf')).mode & 0o7777, 0o640, 'with the mode asked, whatever the umask');
    const got = await b.store.read('/etc/app/app.conf');
    t.equal(got && text(got.bytes), 'one\n', 'read back');
    t.equal(got?.mode, 0o640, 'its mode read back');
  });

  check('a rewrite replaces the file whole and leaves no temp file', async (t, b) => {
    await b.store.write('/etc/app.conf', bytes('a much longer first version\n'), 0o644);
    const id = await b.store.write('/etc/app.conf', bytes('short\n'), 0o600);
    t.equal(readFileSync(join(b.root, 'etc/app.conf'), 'utf8'), 'short\n', 'the new bytes only');
    t.equal(statSync(join(b.root, 'etc/app.conf')).mode & 0o7777, 0o600, 'the new mode');
    t.same(readdirSync(join(b.root, 'etc')), ['app.conf'], 'nothing else left in the folder');
    const got = await b.store.read('/etc/app.conf');
    if (typeof id === 'string' && got?.identity) t.equal(got.identity, id, 'write answers the identity read then gives');
  });
}

/** Where a store never reaches: outside the root, through a symlink, into what is not a regular file. */
function pathChecks(check: Check): void {
  check('paths outside the root or not absolute are refused, nothing written', async (t, b) => {
    for (const p of ['/../outside/x.conf', '/etc/../../outside/x.conf']) {
      const code = await codeOf(() => b.store.write(p, bytes('x'), 0o644));
      t.ok(code === 'MESHP_PATH_ESCAPES_ROOT' || code === 'MESHP_PATH_INVALID', `${p}: refused (${code})`);
    }
    t.equal(await codeOf(() => b.store.write('etc/relative.conf', bytes('x'), 0o644)), 'MESHP_PATH_INVALID', 'a relative path: MESHP_PATH_INVALID');
    t.same(readdirSync(b.outside), [], 'nothing appeared outside the root');
  });

  check('a symlink is never followed: at the end of a path or in a folder on it', async (t, b) => {
    writeFileSync(join(b.outside, 'target.conf'), 'theirs\n');
    mkdirSync(join(b.root, 'etc'));
    symlinkSync(join(b.outside, 'target.conf'), join(b.root, 'etc/link.conf'));
    symlinkSync(b.outside, join(b.root, 'etc/linked-dir'));
    // A link leading out of the root may be refused as escaping it; one inside it, as a symlink.
    const refused = (code: string) => code === 'MESHP_PATH_SYMLINK' || code === 'MESHP_PATH_ESCAPES_ROOT';
    t.ok(refused(await codeOf(() => b.store.read('/etc/link.conf'))), 'read through a symlinked file: refused');
    t.ok(refused(await codeOf(() => b.store.write('/etc/link.conf', bytes('mine\n'), 0o644))), 'write to it: refused');
    t.ok(refused(await codeOf(() => b.store.write('/etc/linked-dir/target.conf', bytes('mine\n'), 0o644))), 'write through a symlinked folder: refused');
    put(b.root, '/etc/real.conf', 'real\n');
    symlinkSync('real.conf', join(b.root, 'etc/inner-link.conf'));
    t.equal(await codeOf(() => b.store.read('/etc/inner-link.conf')), 'MESHP_PATH_SYMLINK', 'a link to a file inside the root: MESHP_PATH_SYMLINK');
    t.equal(await codeOf(() => b.store.write('/etc/inner-link.conf', bytes('mine\n'), 0o644)), 'MESHP_PATH_SYMLINK', 'written through: refused');
    t.equal(readFileSync(join(b.root, 'etc/real.conf'), 'utf8'), 'real\n', 'its target unchanged');
    await codeOf(() => b.store.remove('/etc/link.conf'));
    t.equal(readFileSync(join(b.outside, 'target.conf'), 'utf8'), 'theirs\n', "the link's target is unchanged, whatever remove did");
    t.same(readdirSync(b.outside).sort(), ['target.conf'], 'nothing added beside it');
  });

  check('a FIFO or a folder is not a regular file: refused without blocking', async (t, b) => {
    mkdirSync(join(b.root, 'run'));
    execFileSync('mkfifo', [join(b.root, 'run/pipe')]);
    mkdirSync(join(b.root, 'run/dir'));
    t.equal(await codeOf(() => b.store.read('/run/pipe')), 'MESHP_FILE_NOT_REGULAR', 'read a FIFO: refused');
    t.equal(await codeOf(() => b.store.write('/run/pipe', bytes('x'), 0o644)), 'MESHP_FILE_NOT_REGULAR', 'write over a FIFO: refused');
    t.equal(await codeOf(() => b.store.write('/run/dir', bytes('x'), 0o644)), 'MESHP_FILE_NOT_REGULAR', 'write over a folder: refused');
    t.ok(lstatSync(join(b.root, 'run/pipe')).isFIFO(), 'the FIFO is still there');
  });
}

/** What a store changes only as planned: `expect`, and remove. */
function changeChecks(check: Check): void {
  check('a file changed since the plan is not overwritten or removed (expect)', async (t, b) => {
    put(b.root, '/etc/app.conf', 'found\n');
    const seen = await b.store.read('/etc/app.conf');
    t.equal(
      await codeOf(() => b.store.write('/etc/app.conf', bytes('mine\n'), 0o644, { expect: null })),
      'MESHP_FILE_SWAPPED',
      'expected absent, found present: refused',
    );
    if (seen?.identity) {
      put(b.root, '/etc/other.conf', 'other\n');
      const other = await b.store.read('/etc/other.conf');
      t.equal(
        await codeOf(() => b.store.write('/etc/app.conf', bytes('mine\n'), 0o644, { expect: other?.identity ?? 'none' })),
        'MESHP_FILE_SWAPPED',
        'expected another file: refused',
      );
      t.equal(
        await codeOf(() => b.store.remove('/etc/app.conf', { expect: other?.identity ?? 'none' })),
        'MESHP_FILE_SWAPPED',
        'remove expecting another file: refused',
      );
      await b.store.write('/etc/app.conf', bytes('mine\n'), 0o644, { expect: seen.identity });
      t.equal(readFileSync(join(b.root, 'etc/app.conf'), 'utf8'), 'mine\n', 'expected the file it is: written');
    }
  });

  check('remove takes the entry; an absent file is no error', async (t, b) => {
    put(b.root, '/etc/gone.conf', 'x\n');
    await b.store.remove('/etc/gone.conf');
    t.notOk(readdirSync(join(b.root, 'etc')).includes('gone.conf'), 'removed');
    t.equal(await codeOf(() => b.store.remove('/etc/gone.conf')), 'no error', 'removing it again is no error');
  });
}

/** A failure says whose it is. */
function attributionChecks(check: Check): void {
  check("a failing store's error names the plugin (attributed by the host)", async (t, b) => {
    mkdirSync(join(b.root, 'etc'));
    symlinkSync(b.outside, join(b.root, 'etc/linked'));
    try {
      await b.store.write('/etc/linked/x', bytes('x'), 0o644);
      t.fail('a write through a symlink was not refused');
    } catch (e) {
      t.equal(isMeshpError(e) ? e.attribution?.plugin : undefined, b.plugin, `attributed to ${b.plugin}`);
      t.ok(
        isMeshpError(e) && e.oneLine().includes(`[${b.plugin} at files.write]`),
        `its line names the plugin and the method: ${isMeshpError(e) ? e.oneLine() : String(e)}`,
      );
    }
  });
}

/** Runs every check of the file-store contract against the plugin `spec.plugin()` makes. */
export function fileStoreConformance(t: KitTest, spec: FileStoreKitSpec): void {
  const check: Check = (name, fn) => t.test(name, {}, async (t) => fn(t, await bed(t, spec)));
  readWriteChecks(check);
  pathChecks(check);
  changeChecks(check);
  attributionChecks(check);
}
