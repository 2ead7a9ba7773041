import t from 'tap';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { PLUGIN_API_VERSION, type ModuleDecl, type Plugin } from '@meshp/core';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

const CONF = '/etc/web/web.conf';
const KEY = `file:${CONF}`;

function web(taken: boolean, extra: Partial<ModuleDecl> = {}): ModuleDecl {
  return { name: 'web', taken, files: [{ path: CONF, content: 'mesh\n', mode: '0644' }], ...extra };
}

function put(root: string, path: string, content: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), content);
}

const read = (root: string, path: string) => readFileSync(join(root, path), 'utf8');

async function originals(stateDir: string) {
  const s = new SqliteHostStore(stateDir);
  try {
    return await s.listOriginals();
  } finally {
    await s.close();
  }
}

t.test('a found file on an adopted node is held byte for byte, its original recorded', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  const r = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(r, KEY), 'held');
  t.equal(read(b.root, CONF), 'predecessor\n');
  const [orig] = await originals(b.stateDir);
  t.equal(Buffer.from(orig!.original).toString(), 'predecessor\n');
  assertPrivate(t, b.stateDir);
});

t.test('assigning a module on an adopted node creates what is not there', async (t) => {
  const b = bed(t);
  const r = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(r, KEY), 'created');
  t.equal(read(b.root, CONF), 'mesh\n');
  const again = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(again, KEY), 'owned', 'the next reconcile sees it as the host own');
});

t.test('a held file changed by something else is reported changed and never reverted', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  await b.apply(declaration('adopted', [web(false)]));
  put(b.root, CONF, 'predecessor, rewritten\n');
  const r = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(r, KEY), 'changed');
  t.equal(read(b.root, CONF), 'predecessor, rewritten\n');
  const [orig] = await originals(b.stateDir);
  t.equal(Buffer.from(orig!.original).toString(), 'predecessor\n', 'the original is the first one seen');
  t.ok(orig!.changedAt, 'the change is recorded');
});

t.test('a held file removed by something else is reported changed and not recreated', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  await b.apply(declaration('adopted', [web(false)]));
  rmSync(join(b.root, CONF));
  const r = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(r, KEY), 'changed');
  t.notOk(existsSync(join(b.root, CONF)));
});

t.test('taking a module converges its held file and keeps the original', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  await b.apply(declaration('adopted', [web(false)]));
  const r = await b.apply(declaration('adopted', [web(true)]));
  t.equal(stateOf(r, KEY), 'owned');
  t.equal(read(b.root, CONF), 'mesh\n');
  const [orig] = await originals(b.stateDir);
  t.equal(Buffer.from(orig!.original).toString(), 'predecessor\n');
});

t.test('a held file whose module is unassigned is never removed', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  await b.apply(declaration('adopted', [web(false)]));
  const r = await b.apply(declaration('adopted', []));
  t.equal(stateOf(r, KEY), 'released');
  t.equal(read(b.root, CONF), 'predecessor\n');
});

t.test('a taken file with a kept original is left in place when its module is unassigned', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  await b.apply(declaration('adopted', [web(false)]));
  await b.apply(declaration('adopted', [web(true)]));
  const r = await b.apply(declaration('adopted', []));
  t.equal(stateOf(r, KEY), 'released');
  t.ok(existsSync(join(b.root, CONF)));
});

t.test('a file the host wrote and no longer declares is removed', async (t) => {
  const b = bed(t);
  await b.apply(declaration('adopted', [web(false)]));
  const r = await b.apply(declaration('adopted', []));
  t.equal(stateOf(r, KEY), undefined, 'no longer reported');
  t.notOk(existsSync(join(b.root, CONF)));
});

t.test('a file the host wrote in an earlier life of the node is not found', async (t) => {
  const b = bed(t);
  await b.apply(declaration('adopted', [web(false)]));
  // A new host process, the same state folder: the record says the host wrote it.
  const r = await b.apply(declaration('adopted', [web(false, { files: [{ path: CONF, content: 'mesh v2\n' }] })]));
  t.equal(stateOf(r, KEY), 'owned');
  t.equal(read(b.root, CONF), 'mesh v2\n', 'the host own file converges');
  t.same(await originals(b.stateDir), [], 'nothing was ever found');
});

t.test('on a converged node a found file has its original recorded, then is converged', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  const r = await b.apply(declaration('converged', [web(false)]));
  t.equal(stateOf(r, KEY), 'owned');
  t.equal(read(b.root, CONF), 'mesh\n');
  const [orig] = await originals(b.stateDir);
  t.equal(Buffer.from(orig!.original).toString(), 'predecessor\n');
});

t.test('a create-once file that exists is never rewritten', async (t) => {
  const b = bed(t);
  const once = (content: string): ModuleDecl => ({ name: 'web', taken: true, files: [{ path: CONF, content, createOnce: true }] });
  await b.apply(declaration('converged', [once('first\n')]));
  put(b.root, CONF, 'edited by the operator\n');
  const r = await b.apply(declaration('converged', [once('second\n')]));
  t.equal(stateOf(r, KEY), 'owned');
  t.equal(read(b.root, CONF), 'edited by the operator\n');
});

t.test('a path with a ".." segment refuses the whole apply and writes nothing', async (t) => {
  const b = bed(t);
  const decl = declaration('converged', [
    {
      name: 'web',
      taken: true,
      files: [
        { path: '/etc/ok.conf', content: 'x' },
        { path: '/etc/../../escape', content: 'x' },
      ],
    },
  ]);
  await t.rejects(b.apply(decl), { code: 'MESHP_PATH_ESCAPES_ROOT' });
  t.notOk(existsSync(join(b.root, 'etc/ok.conf')));
  t.notOk(existsSync(join(b.dir, 'escape')));
});

t.test('a symlink out of the root refuses the whole apply and writes nothing', async (t) => {
  const b = bed(t);
  const outside = join(b.dir, 'outside');
  mkdirSync(outside);
  mkdirSync(join(b.root, 'etc'), { recursive: true });
  symlinkSync(outside, join(b.root, 'etc/linked'));
  const decl = declaration('converged', [
    {
      name: 'web',
      taken: true,
      files: [
        { path: '/etc/ok.conf', content: 'x' },
        { path: '/etc/linked/evil.conf', content: 'x' },
      ],
    },
  ]);
  await t.rejects(b.apply(decl), { code: 'MESHP_PATH_ESCAPES_ROOT' });
  t.same(readdirSync(outside), []);
  t.notOk(existsSync(join(b.root, 'etc/ok.conf')));
});

t.test('a preview changes nothing: no file, no record', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  const r = await b.apply(
    declaration('converged', [
      web(false, {
        files: [
          { path: CONF, content: 'm' },
          { path: '/etc/new', content: 'n' },
        ],
      }),
    ]),
    { preview: true },
  );
  t.same(r.plan.actions.map((a) => a.op).sort(), ['converge', 'create']);
  t.equal(read(b.root, CONF), 'predecessor\n');
  t.notOk(existsSync(join(b.root, 'etc/new')));
  t.same(await originals(b.stateDir), []);
});

t.test('the guard refuses a plugin action that would touch a held resource', async (t) => {
  const b = bed(t);
  put(b.root, CONF, 'predecessor\n');
  let ran = false;
  const rogue: Plugin = {
    name: 'rogue',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.plan.tapPromise('rogue', async (plan) => ({
        ...plan,
        actions: [
          ...plan.actions,
          {
            key: KEY,
            kind: 'file',
            module: 'web',
            op: 'converge',
            state: 'owned',
            run: async () => {
              ran = true;
            },
          },
        ],
      }));
    },
  };
  const r = await b.apply(declaration('adopted', [web(false)]), { extra: [rogue] });
  t.notOk(ran, 'the rogue action never ran');
  t.ok(r.plan.actions.some((a) => a.op === 'refuse' && /MESHP_GUARD_VETO/.test(a.reason ?? '')));
  t.equal(read(b.root, CONF), 'predecessor\n');
});

t.test('two modules declaring one file are refused before anything is read', async (t) => {
  const b = bed(t);
  const decl = declaration('adopted', [web(false), { ...web(false), name: 'other' }]);
  await t.rejects(b.apply(decl), { code: 'MESHP_DECLARATION_INVALID', message: /both module web and module other/ });
});

t.test('containers are refused when no runtime plugin is loaded; files still converge', async (t) => {
  const b = bed(t);
  const r = await b.apply(declaration('adopted', [web(false, { containers: [{ name: 'web', image: 'lab/busybox:1' }] })]));
  t.equal(stateOf(r, 'container:web'), 'refused');
  t.match(r.report.resources.find((x) => x.key === 'container:web')?.reason, /MESHP_PROVIDER_MISSING/);
  t.equal(stateOf(r, KEY), 'created');
});
