/** The testkit's standalone runner: a suite run with plain `node` prints TAP and fails the process when a check fails. */
import t from 'tap';
import { spawnSync } from 'node:child_process';

function run(body: string): { status: number | null; stdout: string } {
  const script = `import { standalone } from '@meshp/testkit';\nawait standalone('kit', async (t) => {\n${body}\n});\n`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: process.cwd() });
  return { status: r.status, stdout: r.stdout + r.stderr };
}

t.test('a passing suite: TAP out, exit 0, subtests after the body, teardowns last first', async (t) => {
  const r = run(`
    t.teardown(() => console.log('# teardown outer'));
    t.test('first', {}, async (t) => { t.ok(true, 'one'); t.same({ a: [1] }, { a: [1] }, 'same'); t.teardown(() => console.log('# teardown inner')); });
    t.test('known', { todo: 'a bug named' }, async (t) => { t.equal(1, 2, 'fails, as a todo'); });
    t.equal(t.passing(), true, 'passing so far');`);
  t.equal(r.status, 0, r.stdout);
  t.match(r.stdout, /^TAP version 14/);
  t.match(r.stdout, /ok 1 - passing so far\n# Subtest: first\n {4}ok 1 - one\n {4}ok 2 - same\n# teardown inner\n {4}1\.\.2\nok 2 - first/);
  t.match(r.stdout, /not ok 1 - fails, as a todo[\s\S]*ok 3 - known # TODO a bug named/);
  t.match(r.stdout, /# teardown outer\n1\.\.3\n$/);
});

t.test('a failing check or a throw: not ok, exit 1, teardowns still run', async (t) => {
  const r = run(`
    t.teardown(() => console.log('# cleaned'));
    t.test('fails', {}, async (t) => { t.same([1], [2], 'different'); });
    t.test('throws', {}, async () => { throw new Error('boom'); });`);
  t.equal(r.status, 1, r.stdout);
  t.match(r.stdout, /not ok 1 - different/);
  t.match(r.stdout, /not ok 1 - threw: boom/);
  t.match(r.stdout, /not ok 1 - fails[\s\S]*not ok 2 - throws/);
  t.match(r.stdout, /# cleaned/);
});
