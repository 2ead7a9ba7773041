/**
 * The window between the last check and the write, closed (issue 13): on a real file system, a
 * fault injected with sinon at the exact point, just before the kernel call that places or takes
 * the file, swaps the declared path for a symlink, another file, or its folder for a symlink.
 * The kernel decides (renameat2 NOREPLACE / EXCHANGE): nothing is written through the link, what
 * was swapped in is put back as found, the write or removal is refused with MESHP_FILE_SWAPPED,
 * and no temp file is left behind.
 */
import t, { type Test } from 'tap';
import sinon from 'sinon';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalFileStore, renameSys } from '@meshp/files-local';

const mesh = new TextEncoder().encode('mesh\n');

function bedOf(t: Test) {
  const root = mkdtempSync(join(tmpdir(), 'meshp-race-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'etc/app'), { recursive: true });
  mkdirSync(join(root, 'victim'));
  writeFileSync(join(root, 'victim/secret'), 'precious\n');
  const sandbox = sinon.createSandbox();
  t.teardown(() => sandbox.restore());
  return { root, sandbox, store: new LocalFileStore(root), file: join(root, 'etc/app/app.conf') };
}

/** Runs `fault` once, right before the real call, then calls through. */
function before<K extends 'exchange' | 'noReplace'>(sandbox: sinon.SinonSandbox, k: K, fault: () => void) {
  const real = renameSys[k];
  let done = false;
  return sandbox.stub(renameSys, k).callsFake((fd: number, a: string, b: string) => {
    if (!done) fault();
    done = true;
    return real(fd, a, b);
  });
}

const leftovers = (dir: string) => readdirSync(dir).filter((n) => n.includes('.meshp-'));

t.test('without a fault the kernel call is the one used, and leaves nothing behind', async (t) => {
  const b = bedOf(t);
  const exchange = b.sandbox.spy(renameSys, 'exchange');
  const noReplace = b.sandbox.spy(renameSys, 'noReplace');
  const first = await b.store.write('/etc/app/app.conf', mesh, 0o644, { expect: null });
  t.equal(noReplace.firstCall.returnValue, 'ok', 'a new file is placed with RENAME_NOREPLACE');
  const second = await b.store.write('/etc/app/app.conf', new TextEncoder().encode('v2\n'), 0o600, { expect: first });
  t.equal(exchange.firstCall.returnValue, 'ok', 'a replacement goes through RENAME_EXCHANGE');
  t.not(second, first);
  t.equal(readFileSync(b.file, 'utf8'), 'v2\n');
  t.equal(statSync(b.file).mode & 0o777, 0o600);
  await b.store.remove('/etc/app/app.conf', { expect: second });
  t.throws(() => lstatSync(b.file), { code: 'ENOENT' });
  t.same(leftovers(join(b.root, 'etc/app')), []);
});

t.test('replaced by a symlink between the check and the write: nothing written through it', async (t) => {
  const b = bedOf(t);
  const id = await b.store.write('/etc/app/app.conf', mesh, 0o644, { expect: null });
  before(b.sandbox, 'exchange', () => {
    rmSync(b.file);
    symlinkSync('../../victim/secret', b.file);
  });
  await t.rejects(b.store.write('/etc/app/app.conf', new TextEncoder().encode('evil\n'), 0o644, { expect: id }), {
    code: 'MESHP_FILE_SWAPPED',
    message: /a symlink was there at the write; put back as found/,
  });
  t.equal(readFileSync(join(b.root, 'victim/secret'), 'utf8'), 'precious\n', 'the link target is untouched');
  t.ok(lstatSync(b.file).isSymbolicLink(), 'the link is back where it was found');
  t.equal(readlinkSync(b.file), '../../victim/secret');
  t.same(leftovers(join(b.root, 'etc/app')), [], 'no temp file left');
});

t.test('replaced by another file between the check and the write: that file is kept', async (t) => {
  const b = bedOf(t);
  const id = await b.store.write('/etc/app/app.conf', mesh, 0o644);
  before(b.sandbox, 'exchange', () => {
    writeFileSync(`${b.file}.new`, 'appeared meanwhile\n');
    renameSync(`${b.file}.new`, b.file);
  });
  await t.rejects(b.store.write('/etc/app/app.conf', new TextEncoder().encode('v2\n'), 0o644, { expect: id }), { code: 'MESHP_FILE_SWAPPED' });
  t.equal(readFileSync(b.file, 'utf8'), 'appeared meanwhile\n');
  t.same(leftovers(join(b.root, 'etc/app')), []);
  // With no expectation from a plan, the write is bound to what its own walk saw: the same.
  b.sandbox.restore();
  before(b.sandbox, 'exchange', () => {
    writeFileSync(`${b.file}.x`, '');
    renameSync(`${b.file}.x`, b.file);
  });
  await t.rejects(b.store.write('/etc/app/app.conf', mesh, 0o644), { code: 'MESHP_FILE_SWAPPED' });
  t.equal(readFileSync(b.file, 'utf8'), '', 'what appeared is kept');
});

t.test('a symlink made where the plan saw nothing: refused by the kernel, not replaced', async (t) => {
  const b = bedOf(t);
  before(b.sandbox, 'noReplace', () => symlinkSync('../../victim/secret', b.file));
  await t.rejects(b.store.write('/etc/app/app.conf', mesh, 0o644, { expect: null }), { code: 'MESHP_FILE_SWAPPED', message: /something was made there/ });
  t.equal(readlinkSync(b.file), '../../victim/secret', 'the link is left');
  t.equal(readFileSync(join(b.root, 'victim/secret'), 'utf8'), 'precious\n');
  t.same(leftovers(join(b.root, 'etc/app')), []);
});

t.test('a removal whose file is swapped for a symlink at the last moment removes nothing', async (t) => {
  const b = bedOf(t);
  const id = await b.store.write('/etc/app/app.conf', mesh, 0o644);
  before(b.sandbox, 'noReplace', () => {
    rmSync(b.file);
    symlinkSync('../../victim/secret', b.file);
  });
  await t.rejects(b.store.remove('/etc/app/app.conf', { expect: id }), {
    code: 'MESHP_FILE_SWAPPED',
    message: /a symlink was there at the removal; put back as found, not removed/,
  });
  t.equal(readlinkSync(b.file), '../../victim/secret', 'the link is put back');
  t.equal(readFileSync(join(b.root, 'victim/secret'), 'utf8'), 'precious\n', 'its target is not removed');
  t.same(leftovers(join(b.root, 'etc/app')), []);
});

t.test('the folder swapped for a symlink at the last moment: the write stays in the folder opened', async (t) => {
  const b = bedOf(t);
  const id = await b.store.write('/etc/app/app.conf', mesh, 0o644);
  before(b.sandbox, 'exchange', () => {
    renameSync(join(b.root, 'etc/app'), join(b.root, 'etc/moved'));
    symlinkSync('../victim', join(b.root, 'etc/app'));
    writeFileSync(join(b.root, 'victim/app.conf'), 'victim file\n');
  });
  await b.store.write('/etc/app/app.conf', new TextEncoder().encode('v2\n'), 0o644, { expect: id });
  t.equal(readFileSync(join(b.root, 'victim/app.conf'), 'utf8'), 'victim file\n', 'nothing written where the link points');
  t.equal(readFileSync(join(b.root, 'etc/moved/app.conf'), 'utf8'), 'v2\n', 'written into the folder the walk opened');
  t.same(leftovers(join(b.root, 'etc/moved')), []);
  // The next walk meets the link and refuses it.
  await t.rejects(b.store.write('/etc/app/app.conf', mesh, 0o644), { code: 'MESHP_PATH_SYMLINK' });
});
