/**
 * A change that changes nothing (issue 32): the same mode, a module assigned or taken already, the
 * policy, a component or a catalogue module set to what it is. No version, no log entry, no delta,
 * no transition waiting for a report that will never come: the current version is answered.
 */
import t from 'tap';
import { Controller, MemoryStore } from '@meshp/controller';

function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  c.defineModule('n', { name: 'web', files: [{ path: '/etc/web.conf', content: 'one\n' }] });
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'], mode: 'adopted' });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: ['b'] });
  c.assignModule('n', 'x', 'web');
  return c;
}

t.test('each admin change made twice moves the version once', async (t) => {
  const cases: [string, (c: Controller) => number][] = [
    ['the same mode', (c) => c.setMode('n', 'x', 'adopted')],
    ['a module assigned already', (c) => c.assignModule('n', 'x', 'web')],
    ['the policy in force', (c) => c.setPolicy('n', [{ from: 'a', to: 'b' }])],
    ['the same catalogue module', (c) => c.defineModule('n', { name: 'web', files: [{ path: '/etc/web.conf', content: 'one\n' }] })],
    ['the same component', (c) => c.setComponent('n', 'dns', { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] })],
  ];
  for (const [what, change] of cases) {
    const c = setup();
    if (what === 'the same component') c.setComponent('n', 'dns', { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] });
    const before = c.stateVersion('n');
    const answered = change(c);
    t.equal(c.stateVersion('n'), before, `${what}: no new version`);
    t.equal(answered, before, `${what}: the current version is answered`);
  }
});

t.test('a module taken already, taken again: no version', async (t) => {
  const c = setup();
  c.takeModule('n', 'x', 'web');
  const before = c.stateVersion('n');
  t.equal(c.takeModule('n', 'x', 'web'), before);
  t.equal(c.stateVersion('n'), before);
});

t.test('the same mode asked again asks no transition: nothing waits for a report', async (t) => {
  const c = setup();
  const before = c.listNodes('n').find((n) => n.name === 'x')!;
  c.setMode('n', 'x', 'adopted');
  const after = c.listNodes('n').find((n) => n.name === 'x')!;
  t.same(after.transition ?? null, before.transition ?? null, 'the transition is as it was');
});

t.test('a real change still moves the version', async (t) => {
  const c = setup();
  const before = c.stateVersion('n');
  c.setMode('n', 'x', 'converged');
  t.equal(c.stateVersion('n'), before + 1);
  c.setPolicy('n', [{ from: 'b', to: 'a' }]);
  t.equal(c.stateVersion('n'), before + 2);
});

t.test('a rename to its own name, the same tags, the same key: no version', async (t) => {
  const c = setup();
  const before = c.stateVersion('n');
  t.equal(c.renameNode('n', 'x', 'x'), before, 'rename to the same name: the current version');
  t.equal(c.setTags('n', 'x', ['a']), before, 'the same tags: the current version');
  t.equal(c.setTags('n', 'x', ['a', 'a']), before, 'the same tags, one named twice: the current version');
  t.equal(c.rotateKey('n', 'x', 'kx'), before, 'the same node key: the current version');
  t.equal(c.stateVersion('n'), before, 'no new version');
  t.ok(c.member('n', 'x'), 'the node is there under its name');
  t.equal(c.setTags('n', 'x', ['b']), before + 1, 'other tags: a new version');
  t.equal(c.renameNode('n', 'x', 'z'), before + 2, 'another name: a new version');
});
