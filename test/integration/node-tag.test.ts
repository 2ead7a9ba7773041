/**
 * Issue 28: `meshp node tag NODE TAG…`, against a real controller over gRPC on 127.0.0.1 and four
 * agents as real processes. The preview names exactly the peers and ports each node gains and loses
 * under the policy in force (computed by the controller, as a policy preview is); after `--yes
 * --preview-id` the agents' own views — read from each agent's store, not from the controller's
 * intent — hold exactly that; a stale id (the tags moved since) is refused and changes nothing; a
 * read-only credential previews and is refused the change; bad tags are refused, coded; the change
 * is in the audit log once, with its actor.
 */
import t from 'tap';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { meshpAsync, startAgent, startController, tokenFor, workdir, writeJson, type AgentProc } from '../helpers/grpc-procs.js';
import { heldViews, settled } from '../helpers/policy-views.js';

const TAGS: Record<string, string[]> = { w1: ['web'], w2: ['web'], d1: ['db'], o1: ['ops'] };
const POLICY = {
  rules: [
    { from: 'web', to: 'db', ports: ['5432'] },
    { from: 'ops', to: 'web', ports: ['22/tcp'] },
  ],
};

interface Entry {
  actor: string;
  method: string;
  node: string | null;
  summary: string;
  stateVersion: number;
}

t.test("a node's tags, previewed as the reachability they change, are what the agents then hold; stale, read-only and bad input change nothing", async (t) => {
  const dir = workdir(t, 'nodetag');
  const ctl = await startController(t, join(dir, 'ctl'));
  const cliAs =
    (credential: string[]) =>
    (...args: string[]) =>
      meshpAsync(...args, '--controller', ctl.address, ...credential);
  const cli = cliAs(['--state', ctl.state]);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return JSON.parse(r.out) as T;
  };
  t.equal((await cli('policy', 'set', writeJson(dir, 'policy.json', POLICY), '--yes')).code, 0);
  const agents: AgentProc[] = [];
  for (const name of Object.keys(TAGS)) agents.push(startAgent(t, dir, name, ctl.address, await tokenFor(ctl, TAGS[name])));
  const v0 = await settled(ctl, 4);
  const held0 = await heldViews(agents);
  t.same(held0.peers, { d1: ['w1', 'w2'], o1: ['w1', 'w2'], w1: ['d1', 'o1'], w2: ['d1', 'o1'] }, 'the agents hold the views of the policy');
  t.same(held0.reach, { 'w1->d1': ['5432/tcp', '5432/udp'], 'w2->d1': ['5432/tcp', '5432/udp'], 'o1->w1': ['22/tcp'], 'o1->w2': ['22/tcp'] });

  // o1: ops -> web. It stops reaching w1 and w2 on 22 (ops -> web) and reaches d1 on 5432 (web -> db).
  const expected = [
    { node: 'd1', peersGained: ['o1'], peersLost: [], portsGained: [], portsLost: [] },
    {
      node: 'o1',
      peersGained: ['d1'],
      peersLost: ['w1', 'w2'],
      portsGained: [{ peer: 'd1', ports: ['5432/tcp', '5432/udp'] }],
      portsLost: [
        { peer: 'w1', ports: ['22/tcp'] },
        { peer: 'w2', ports: ['22/tcp'] },
      ],
    },
    { node: 'w1', peersGained: [], peersLost: ['o1'], portsGained: [], portsLost: [] },
    { node: 'w2', peersGained: [], peersLost: ['o1'], portsGained: [], portsLost: [] },
  ];
  const preview = await json<{ preview: boolean; previewId: string; changes: unknown[]; tagsBefore: string[]; tagsAfter: string[] }>(
    'node',
    'tag',
    'o1',
    'web',
    '--preview',
  );
  t.same(preview.changes, expected, 'the preview names exactly the peers and ports each node gains and loses');
  t.same([preview.tagsBefore, preview.tagsAfter], [['ops'], ['web']]);
  t.match(preview.previewId, /^[0-9a-f]{16}$/);
  const human = await cli('node', 'tag', 'o1', 'web', '--preview');
  t.equal(human.code, 0, human.err);
  t.match(human.out, /would change the tags of o1 from ops to web:/);
  t.match(
    human.out,
    /o1\n\s+\+ peer d1\n\s+\+ d1 5432\/tcp,5432\/udp\n\s+- peer w1\n\s+- peer w2\n\s+- w1 22\/tcp\n\s+- w2 22\/tcp/,
    'said per node, gains (+) and losses (-)',
  );
  t.match(human.out, new RegExp(`preview ${preview.previewId}: nothing changed; apply it with meshp node tag o1 web --yes --preview-id ${preview.previewId}`));
  const offTty = await cli('node', 'tag', 'o1', 'web');
  t.match(offTty.err, /MESHP_CONFIRM_NEEDED/, 'off a terminal, without --yes: asked for, nothing changed');

  // A read-only credential previews, and is refused the change.
  const made = await json<{ credential: string }>('admin', 'create', 'viewer', '--role', 'read-only');
  const viewerFile = join(dir, 'viewer.credential');
  writeFileSync(viewerFile, `${made.credential}\n`, { mode: 0o600 });
  const viewer = cliAs(['--credential', viewerFile]);
  const seen = await viewer('node', 'tag', 'o1', 'web', '--preview', '--json');
  t.equal(seen.code, 0, `read-only may preview: ${seen.err}`);
  t.equal((JSON.parse(seen.out) as { previewId: string }).previewId, preview.previewId, 'the same preview');
  const forbidden = await viewer('node', 'tag', 'o1', 'web', '--yes', '--preview-id', preview.previewId);
  t.match(forbidden.err, /^MESHP_FORBIDDEN: the admin credential viewer is read-only: setTags changes the controller/, 'read-only is refused the change');

  // Bad input: coded, nothing changed.
  t.match((await cli('node', 'tag', 'o1', 'bad tag', '--yes')).err, /^MESHP_USAGE: tag "bad tag" is not valid/, "a tag not of a policy tag's form");
  t.match(
    (await cli('node', 'tag', 'o1', 'x'.repeat(64), '--yes')).err,
    /^MESHP_INPUT_TOO_LARGE: a tag of 64 characters is over the limit of 63/,
    'a tag too long',
  );
  const many = Array.from({ length: 65 }, (_, i) => `t${i}`);
  t.match((await cli('node', 'tag', 'o1', ...many, '--yes')).err, /^MESHP_INPUT_TOO_LARGE: 65 tags are over the limit of 64/, 'too many tags');
  t.match(
    (await cli('node', 'tag', 'o1', 'ops', 'control-node', '--preview')).err,
    /^MESHP_USAGE: the tag control-node is the control-node's, given at genesis/,
    "the control-node's tag is not given by node tag (it opens every member to the holder)",
  );
  t.match((await cli('node', 'tag', 'nobody', 'web', '--preview')).err, /^MESHP_NOT_FOUND/, 'a node that is none');
  t.equal(await settled(ctl, 4), v0, 'the previews and refusals changed nothing');

  // Stale: another node's tags moved since the preview.
  const w2 = await json<{ stateVersion: number; changes: unknown[] }>('node', 'tag', 'w2', 'web', 'extra', '--yes');
  t.same(w2.changes, [], 'a tag no rule names moves no reach');
  const v1 = await settled(ctl, 4, v0 + 1);
  t.equal(v1, v0 + 1, 'one version');
  const stale = await cli('node', 'tag', 'o1', 'web', '--yes', '--preview-id', preview.previewId);
  t.equal(stale.code, 1, 'a stale preview id is refused');
  t.match(stale.err, /^MESHP_PREVIEW_STALE: the policy in force, the membership or the tags of default changed since preview/);
  t.match(
    (await cli('node', 'tag', 'o1', 'db', '--yes', '--preview-id', (await json<{ previewId: string }>('node', 'tag', 'o1', 'web', '--preview')).previewId)).err,
    /^MESHP_PREVIEW_STALE/,
    'a preview id applies to its own tags only',
  );
  t.equal(await settled(ctl, 4), v1, 'nothing was changed');

  // Previewed again and applied by its id: the agents then hold exactly the diff.
  const again = await json<{ previewId: string; changes: unknown[] }>('node', 'tag', 'o1', 'web', '--preview');
  t.same(again.changes, expected, 'the same diff');
  const applied = await json<{ stateVersion: number; tagsAfter: string[] }>('node', 'tag', 'o1', 'web', '--yes', '--preview-id', again.previewId);
  t.equal(applied.stateVersion, v1 + 1, 'changed in one version');
  await settled(ctl, 4, v1 + 1);
  const held1 = await heldViews(agents);
  t.same(held1.peers, { d1: ['o1', 'w1', 'w2'], o1: ['d1'], w1: ['d1'], w2: ['d1'] }, "the agents' views: every peer gained and lost as previewed");
  t.same(
    held1.reach,
    { 'w1->d1': ['5432/tcp', '5432/udp'], 'w2->d1': ['5432/tcp', '5432/udp'], 'o1->d1': ['5432/tcp', '5432/udp'] },
    "the agents' filters: every port gained and lost as previewed",
  );
  t.same(held1.tags.d1!.o1, ['web'], "d1 holds o1's new tags");
  const same = await cli('node', 'tag', 'o1', 'web', '--yes');
  t.match(same.out, /o1 has the tags web already: nothing changed/, 'the same tags again: nothing to change');
  t.equal(await settled(ctl, 4), v1 + 1, 'no version');

  // The audit log: each change once, with its actor and what it changed.
  const entries = (await json<{ entries: Entry[] }>('audit')).entries.filter((e) => e.method === 'setTags');
  t.same(
    entries.map((e) => [e.actor, e.node, e.summary, e.stateVersion]),
    [
      ['admin', 'w2', 'tags of w2: web -> extra,web', v1],
      ['admin', 'o1', `tags of o1: ops -> web (preview ${again.previewId})`, v1 + 1],
      ['admin', 'o1', 'tags of o1: web -> web', v1 + 1],
    ],
    'each tag change asked in the audit log once, with its actor (a preview or a refusal is not)',
  );
  t.ok(
    agents.every((a) => a.proc.alive),
    'every agent still runs',
  );
});
