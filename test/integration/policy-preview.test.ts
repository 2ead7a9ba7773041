/**
 * Issue 28: the policy an operator can read, diff and test, against a real controller over gRPC on
 * 127.0.0.1 and four agents as real processes. `policy set --preview` names exactly the peers and
 * ports each node gains and loses (computed by the controller); after `--yes --preview-id` the
 * agents' own views — read from each agent's store, not from the controller's intent — hold exactly
 * that; a stale preview id is refused and changes nothing; a failing policy test refuses the policy,
 * naming the assertion, and no delta is sent; `policy test` runs the tests alone; `policy get` reads
 * back the rules and tests in force and the version that set them.
 */
import t from 'tap';
import { join } from 'node:path';
import { meshpAsync, startAgent, startController, tokenFor, workdir, writeJson, type AgentProc, type ControllerProc } from '../helpers/grpc-procs.js';
import { heldViews, settled as settle } from '../helpers/policy-views.js';

const TAGS: Record<string, string[]> = { w1: ['web'], w2: ['web'], d1: ['db'], o1: ['ops'] };

const settled = (ctl: ControllerProc, version = 1) => settle(ctl, 4, version);

const BEFORE = {
  rules: [
    { from: 'web', to: 'db', ports: ['5432'] },
    { from: 'ops', to: 'web', ports: ['22/tcp'] },
  ],
};
const AFTER = {
  rules: [
    { from: 'web', to: 'db', ports: ['5432', '6432/tcp'] },
    { from: 'ops', to: 'db' },
  ],
  tests: [
    { from: 'o1', to: 'd1', port: 5432, expect: 'accept' },
    { from: 'tag:ops', to: 'tag:web', port: '22', expect: 'deny' },
    { from: 'w1', to: 'd1', port: '6432/udp', expect: 'deny' },
  ],
};

t.test('the policy diff, previewed by the controller, is what the agents then hold; a stale id and a failing test change nothing', async (t) => {
  const dir = workdir(t, 'policy');
  const ctl = await startController(t, join(dir, 'ctl'));
  const cli = (...args: string[]) => meshpAsync(...args, '--state', ctl.state, '--controller', ctl.address);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return JSON.parse(r.out) as T;
  };
  t.equal((await cli('policy', 'set', writeJson(dir, 'before.json', BEFORE), '--yes')).code, 0, 'the first policy set without a preview, as before');
  const agents: AgentProc[] = [];
  for (const name of Object.keys(TAGS)) agents.push(startAgent(t, dir, name, ctl.address, await tokenFor(ctl, TAGS[name])));
  const v0 = await settled(ctl);

  const got = await json<{ rules: unknown[]; tests: unknown[]; policyVersion: number; stateVersion: number }>('policy', 'get');
  t.same(got.rules, BEFORE.rules, 'policy get: the rules in force');
  t.same(got.tests, [], 'policy get: no tests');
  t.equal(got.policyVersion, 1, 'policy get: the version that set it');
  t.equal(got.stateVersion, v0, "policy get: the network's version now");

  const held0 = await heldViews(agents);
  t.same(held0.peers, { d1: ['w1', 'w2'], o1: ['w1', 'w2'], w1: ['d1', 'o1'], w2: ['d1', 'o1'] }, 'the agents hold the views of the first policy');
  t.same(held0.reach, { 'w1->d1': ['5432/tcp', '5432/udp'], 'w2->d1': ['5432/tcp', '5432/udp'], 'o1->w1': ['22/tcp'], 'o1->w2': ['22/tcp'] });

  const file = writeJson(dir, 'after.json', AFTER);
  const preview = await json<{ preview: boolean; previewId: string; changes: unknown[]; tests: { passed: boolean }[] }>('policy', 'set', file, '--preview');
  t.same(
    preview.changes,
    [
      { node: 'd1', peersGained: ['o1'], peersLost: [], portsGained: [], portsLost: [] },
      {
        node: 'o1',
        peersGained: ['d1'],
        peersLost: ['w1', 'w2'],
        portsGained: [{ peer: 'd1', ports: ['*'] }],
        portsLost: [
          { peer: 'w1', ports: ['22/tcp'] },
          { peer: 'w2', ports: ['22/tcp'] },
        ],
      },
      { node: 'w1', peersGained: [], peersLost: ['o1'], portsGained: [{ peer: 'd1', ports: ['6432/tcp'] }], portsLost: [] },
      { node: 'w2', peersGained: [], peersLost: ['o1'], portsGained: [{ peer: 'd1', ports: ['6432/tcp'] }], portsLost: [] },
    ],
    'the preview names exactly the peers and ports each node gains and loses',
  );
  t.same(
    preview.tests.map((x) => x.passed),
    [true, true, true],
    "the file's tests pass",
  );
  t.match(preview.previewId, /^[0-9a-f]{16}$/);
  const human = await cli('policy', 'set', file, '--preview');
  t.equal(human.code, 0, human.err);
  t.match(human.out, /o1\n\s+\+ peer d1\n\s+\+ d1 \*\n\s+- peer w1\n\s+- peer w2\n\s+- w1 22\/tcp\n\s+- w2 22\/tcp/, 'said per node, gains (+) and losses (-)');
  t.match(human.out, new RegExp(`preview ${preview.previewId}: nothing changed; set it with meshp policy set .* --yes --preview-id ${preview.previewId}`));
  t.equal(await settled(ctl), v0, 'the previews changed nothing');

  // A preview gone stale: the policy in force moved since (set to another and back would be the same; another proposal moves it).
  const other = await json<{ previewId: string }>('policy', 'set', writeJson(dir, 'other.json', { rules: [{ from: 'web', to: 'db' }] }), '--preview');
  t.equal((await cli('policy', 'set', writeJson(dir, 'mid.json', { rules: [...BEFORE.rules, { from: 'db', to: 'ops', ports: ['9100'] }] }), '--yes')).code, 0);
  const v1 = await settled(ctl, v0 + 1);
  const stale = await cli('policy', 'set', join(dir, 'other.json'), '--yes', '--preview-id', other.previewId);
  t.equal(stale.code, 1, 'a stale preview id is refused');
  t.match(stale.err, /^MESHP_PREVIEW_STALE: the policy in force or the membership of default changed since preview/);
  t.equal(await settled(ctl), v1, 'nothing was set');
  const wrongFile = await cli('policy', 'set', join(dir, 'before.json'), '--yes', '--preview-id', preview.previewId);
  t.match(wrongFile.err, /^MESHP_PREVIEW_STALE/, 'a preview id applies to its own file only');
  t.equal((await cli('policy', 'set', join(dir, 'before.json'), '--yes')).code, 0, 'the first policy back');
  const v2 = await settled(ctl, v1 + 1);

  // The diff previewed again (the policy in force is the first one's again: the same diff), applied by its id.
  const again = await json<{ previewId: string; changes: unknown[] }>('policy', 'set', file, '--preview');
  t.same(again.changes, preview.changes, 'the same policy in force and membership: the same diff');
  const setMark = ctl.proc.lines.length;
  const applied = await json<{ stateVersion: number }>('policy', 'set', file, '--yes', '--preview-id', again.previewId);
  t.equal(applied.stateVersion, v2 + 1, 'set in one version');
  await settled(ctl, v2 + 1);
  // The controller's one line for the fan-out of the change (each agent's delta is a debug line).
  const fanned = await ctl.proc.waitFor((l) => l.msg === 'fan-out sent' && l.version === v2 + 1, 15_000, setMark);
  t.equal(fanned.agents, agents.length, `the fan-out line: the change went to all ${agents.length} agents`);
  const held1 = await heldViews(agents);
  t.same(held1.peers, { d1: ['o1', 'w1', 'w2'], o1: ['d1'], w1: ['d1'], w2: ['d1'] }, "the agents' views: every peer gained and lost as previewed");
  t.same(
    held1.reach,
    { 'w1->d1': ['5432/tcp', '5432/udp', '6432/tcp'], 'w2->d1': ['5432/tcp', '5432/udp', '6432/tcp'], 'o1->d1': ['*'] },
    "the agents' filters: every port gained and lost as previewed",
  );
  const now = await json<{ rules: unknown[]; tests: unknown[]; policyVersion: number }>('policy', 'get');
  t.same(now.rules, AFTER.rules, 'policy get: the rules set');
  t.same(
    now.tests,
    [
      { from: 'o1', to: 'd1', port: '5432/tcp', expect: 'accept' },
      { from: 'tag:ops', to: 'tag:web', port: '22/tcp', expect: 'deny' },
      { from: 'w1', to: 'd1', port: '6432/udp', expect: 'deny' },
    ],
    'policy get: the tests set with it',
  );
  t.equal(now.policyVersion, applied.stateVersion, 'policy get: the version that set it');

  // A failing test: the policy is refused, each failing assertion named, nothing changed, no delta sent.
  const failing = writeJson(dir, 'failing.json', {
    rules: [{ from: 'web', to: 'db' }],
    tests: [
      { from: 'w1', to: 'd1', port: 5432, expect: 'accept' },
      { from: 'o1', to: 'd1', port: 5432, expect: 'accept' },
      { from: 'w1', to: 'd1', port: 22, expect: 'deny' },
    ],
  });
  const mark = ctl.proc.lines.length;
  const refused = await cli('policy', 'set', failing, '--yes');
  t.equal(refused.code, 1, 'a failing test refuses the policy');
  t.match(
    refused.err,
    /^MESHP_POLICY_TEST_FAILED: 2 of the policy's 3 test\(s\) failed, nothing was set: o1 -> d1 5432\/tcp: expected accept, got deny \(no rule lets ops reach db on 5432\/tcp\); w1 -> d1 22\/tcp: expected deny, got accept \(accepted by the rule web -> db\)/,
  );
  t.equal((await cli('policy', 'set', failing, '--preview')).code, 1, 'its preview says so too (exit 1)');
  t.same((await json<{ rules: unknown[] }>('policy', 'get')).rules, AFTER.rules, 'the policy in force is unchanged');
  t.equal(await settled(ctl), applied.stateVersion, 'no version moved');
  t.notOk(
    ctl.proc.lines.slice(mark).some((l) => l.msg === 'fan-out sent' || l.msg === 'delta sent' || l.msg === 'snapshot sent'),
    'no delta was sent',
  );

  // policy test: the tests alone, nothing set.
  const tested = await cli('policy', 'test', failing);
  t.equal(tested.code, 1, 'policy test of a failing file: exit 1');
  t.match(tested.out, /ok {3}w1 -> d1 5432\/tcp expect accept: accept/);
  t.match(tested.out, /FAIL o1 -> d1 5432\/tcp expect accept: deny/);
  t.match(tested.out, /1 of 3 test\(s\) passed/);
  t.match(tested.err, /^MESHP_POLICY_TEST_FAILED: 2 of 3 test\(s\) failed:/);
  const passing = await json<{ passed: number; failed: number }>('policy', 'test', file);
  t.same([passing.passed, passing.failed], [3, 0], 'policy test of a passing file: exit 0');
  const badTest = await cli('policy', 'test', writeJson(dir, 'bad.json', { rules: [], tests: [{ from: 'a', to: 'b', port: 80, expect: 'allow' }] }));
  t.equal(badTest.code, 1);
  t.match(badTest.err, /^MESHP_POLICY_INVALID: policy file: tests\[0\]\.expect/, 'a test that is not one is refused by the schema, naming the field');
  // The controller checks with the same schema what a client sends it, past any CLI.
  const admin = await ctl.admin!();
  await t.rejects(
    admin.call('setPolicy', { network: 'default', rules: [], tests: [{ from: 'a', to: 'b', port: '80', expect: 'allow' }], previewId: '' }),
    { code: 'MESHP_POLICY_INVALID' },
    'a bad test sent past the CLI is refused by the controller',
  );
  t.equal(await settled(ctl), applied.stateVersion, 'policy test changed nothing');
  t.ok(
    agents.every((a) => a.proc.alive),
    'every agent still runs',
  );
});
