// Issue 33 item 10, "nothing can be read back": `meshp catalogue list | show | remove` and
// `meshp token list | revoke`, against a real controller over gRPC on 127.0.0.1. A module assigned to
// a node is not removed (MESHP_MODULE_ASSIGNED names the node) and the node keeps it; a token is
// listed by its id, never its secret; a revoked token's Enrol is refused MESHP_TOKEN_INVALID, and a
// used one cannot be revoked (MESHP_TOKEN_USED).
import t from 'tap';
import { join } from 'node:path';
import { adminCalls, meshpAsync, startController, tokenFor, workdir, writeJson } from '../helpers/grpc-procs.js';
import { RawAgent } from '../helpers/raw-agent.js';

interface ModuleRow {
  name: string;
  files: number;
  openings: number;
  assignedTo: string[];
  takenBy: string[];
  settings: string[];
}

interface TokenRow {
  id: string;
  adopted: boolean;
  tags: string[];
  createdAt: string | null;
  expiresAt: string;
  state: string;
  usedBy: string | null;
  revokedAt: string | null;
}

t.test('catalogue and tokens read back', async (t) => {
  const dir = workdir(t, 'readback');
  const ctl = await startController(t, join(dir, 'ctl'));
  const cli = async (...args: string[]) => meshpAsync(...args, '--state', ctl.state, '--controller', ctl.address);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return JSON.parse(r.out) as T;
  };
  const admin = adminCalls(() => ctl);

  t.test('catalogue list, show, remove', async (t) => {
    const file = writeJson(dir, 'cat.json', {
      modules: [
        { name: 'motd', files: [{ path: '/etc/motd', content: 'hello\n' }] },
        { name: 'web', openings: [{ port: 8080, protocol: 'tcp', path: 'incoming', from: ['{{privateRange}}'] }] },
      ],
    });
    t.equal((await cli('catalogue', 'add', file, '--yes')).code, 0, 'catalogue add');
    const raw = new RawAgent(ctl);
    t.teardown(() => raw.link.close());
    await raw.enrol(await tokenFor(ctl), 'm2');
    await admin.assign('m2', 'motd');

    const listed = await json<{ modules: ModuleRow[] }>('catalogue', 'list');
    t.same(
      listed.modules.map((m) => [m.name, m.files, m.openings, m.assignedTo, m.settings]),
      [
        ['motd', 1, 0, ['m2'], []],
        ['web', 0, 1, [], ['privateRange']],
      ],
      'every module with what it declares, the settings it names, its nodes',
    );
    const table = await cli('catalogue', 'list');
    t.match(table.out, /^MODULE\s+FILES\s+CONTAINERS\s+OPENINGS\s+SETTINGS\s+ASSIGNED TO\s+TAKEN BY/m, 'a table for a person');
    t.match(table.out, /^motd\s+1\s+0\s+0\s+-\s+m2\s+-$/m, 'motd: one file, assigned to m2');

    const shown = await json<{ module: ModuleRow; definition: { name: string; openings: { from: string[] }[] } }>('catalogue', 'show', 'web');
    t.same(shown.definition.openings[0]!.from, ['{{privateRange}}'], 'the definition as stored, the placeholder as written');
    const missing = await cli('catalogue', 'show', 'nope');
    t.equal(missing.code, 1);
    t.match(missing.err, /^MESHP_NOT_FOUND: no module nope/);

    // Assigned to m2: refused, naming it; nothing removed, the assignment kept.
    const preview = await cli('catalogue', 'remove', 'motd', '--preview');
    t.equal(preview.code, 0);
    t.match(preview.out, /refused while it is assigned to m2/, 'the preview says the removal would be refused, and why');
    const refused = await cli('catalogue', 'remove', 'motd', '--yes');
    t.equal(refused.code, 1, 'a module assigned to a node is not removed');
    t.match(refused.err, /^MESHP_MODULE_ASSIGNED: module motd is assigned to m2/, 'refused with its code, naming the node');
    t.ok(
      (await json<{ modules: ModuleRow[] }>('catalogue', 'list')).modules.some((m) => m.name === 'motd'),
      'motd is still in the catalogue',
    );
    const node = await (await ctl.admin!()).call('showNode', { network: 'default', node: 'm2' });
    t.same(node.node?.assignedModules, ['motd'], 'and still assigned to m2: no dangling assignment');

    const noConfirm = await cli('catalogue', 'remove', 'web');
    t.equal(noConfirm.code, 1);
    t.match(noConfirm.err, /^MESHP_CONFIRM_NEEDED/, 'off a terminal, a removal without --yes is refused');
    const webPreview = await cli('catalogue', 'remove', 'web', '--preview');
    t.match(webPreview.out, /would remove module web from the catalogue of default \(assigned to no node/, 'the preview of a removal says what goes');
    t.ok(
      (await json<{ modules: ModuleRow[] }>('catalogue', 'list')).modules.some((m) => m.name === 'web'),
      'and removes nothing',
    );
    const removed = await json<{ removed: string; stateVersion: number }>('catalogue', 'remove', 'web', '--yes');
    t.equal(removed.removed, 'web');
    t.same(
      (await json<{ modules: ModuleRow[] }>('catalogue', 'list')).modules.map((m) => m.name),
      ['motd'],
      'web is gone from the catalogue',
    );
    const assignGone = await cli('module', 'assign', 'm2', 'web', '--yes');
    t.match(assignGone.err, /^MESHP_NOT_FOUND: no module web/, 'and cannot be assigned any more');

    // Unassigned, motd can go.
    await admin.unassign('m2', 'motd');
    t.equal((await cli('catalogue', 'remove', 'motd', '--yes')).code, 0, 'unassigned, a module is removed');
    t.same((await json<{ modules: ModuleRow[] }>('catalogue', 'list')).modules, [], 'the catalogue is empty');
  });

  t.test('token list, revoke, and a refused Enrol', async (t) => {
    const made = await json<{ token: string; id: string }>('token', 'create', '--tag', 'web', '--ttl', '1h');
    const adopted = await json<{ token: string; id: string }>('token', 'create', '--adopted');
    const used = await json<{ token: string; id: string }>('token', 'create');
    const user = new RawAgent(ctl);
    t.teardown(() => user.link.close());
    await user.enrol(used.token, 'm3');

    const listed = await json<{ tokens: TokenRow[] }>('token', 'list');
    const byId = new Map(listed.tokens.map((x) => [x.id, x]));
    t.match(byId.get(made.id), { adopted: false, tags: ['web'], state: 'unused', usedBy: null }, 'an unused token, its tags and mode');
    t.match(byId.get(adopted.id), { adopted: true, state: 'unused' }, 'an adopted one');
    t.match(byId.get(used.id), { state: 'used', usedBy: 'm3' }, 'a used one, with the node that used it');
    t.ok(byId.get(made.id)!.createdAt && byId.get(made.id)!.expiresAt > byId.get(made.id)!.createdAt!, 'made and expires times');
    const table = await cli('token', 'list');
    t.match(table.out, /^ID\s+NETWORK\s+ADOPTED\s+TAGS\s+CREATED\s+EXPIRES\s+STATE/m, 'a table for a person');
    t.match(
      table.out,
      new RegExp(`^${made.id}\\s+default\\s+no\\s+web\\s+\\S+\\s+\\S+\\s+unused$`, 'm'),
      'a row: id, network, adopted, tags, made, expires, state',
    );
    for (const x of [made, adopted, used]) {
      const secret = x.token.split('.').at(-1)!;
      t.notOk(table.out.includes(secret) || JSON.stringify(listed).includes(secret), 'no token secret is shown');
    }

    const preview = await cli('token', 'revoke', made.id, '--preview');
    t.match(preview.out, new RegExp(`would revoke token ${made.id} \\(unused`), 'the preview names the token');
    t.equal((await json<{ tokens: TokenRow[] }>('token', 'list')).tokens.find((x) => x.id === made.id)?.state, 'unused', 'and changes nothing');
    const revoked = await json<{ token: TokenRow }>('token', 'revoke', made.id, '--yes');
    t.equal(revoked.token.state, 'revoked');
    t.ok(revoked.token.revokedAt, 'revoked, with when');

    const late = new RawAgent(ctl);
    t.teardown(() => late.link.close());
    const refused = await late.enrol(made.token, 'm4').then(
      () => null,
      (e: unknown) => e as Error,
    );
    t.ok(refused, 'an Enrol with a revoked token is refused');
    t.match(refused, { code: 'MESHP_TOKEN_INVALID', message: /was revoked at/ }, 'with its code, saying it was revoked');
    const nodes = await (await ctl.admin!()).call('listNodes', { network: 'default' });
    t.notOk(
      nodes.nodes.some((n) => n.name === 'm4'),
      'no node joined with it',
    );

    const usedRevoke = await cli('token', 'revoke', used.id, '--yes');
    t.equal(usedRevoke.code, 1, 'a used token is not revoked');
    t.match(usedRevoke.err, /^MESHP_TOKEN_USED: token [0-9a-f]+ was used by node m3/, 'refused, naming the node that used it');
    const unknown = await cli('token', 'revoke', '0123456789abcdef', '--yes');
    t.match(unknown.err, /^MESHP_NOT_FOUND: no token/, 'an id that names no token');
    const notHex = await cli('token', 'revoke', 'not-an-id', '--yes');
    t.equal(notHex.code, 2, 'an id that is not one is a usage error');

    // The adopted token still enrols: revoking one touches no other.
    const other = new RawAgent(ctl);
    t.teardown(() => other.link.close());
    t.equal((await other.enrol(adopted.token, 'm5')).mode, 'adopted', 'another token still enrols');
  });
});
