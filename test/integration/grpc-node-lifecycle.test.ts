/**
 * The node lifecycle on the admin surface, as real processes on 127.0.0.1: a policy change that
 * hides a peer (UNSCOPED on the wire), a node removed (REMOVED on the wire, the node's stream ended,
 * its credential and key refused from then on), the next policy change answered normally, a node
 * renamed (the agent follows), a duplicate key refused at enrolment, and `meshp node remove` without
 * --yes refused by the CLI. The admin calls go over the in-process Admin client (what the CLI sends;
 * a CLI process per call costs seconds on a busy machine): the controller's and the agents' behaviour
 * is under test here. (`meshp network …`: grpc-networks.test.ts.)
 */
import t from 'tap';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  adminCalls,
  meshpAsync,
  startAgent,
  startController,
  waitUntil,
  workdir,
  type AgentProc,
  nodes as listNodes,
  tokenFor,
} from '../helpers/grpc-procs.js';
import { isMeshpError } from '@meshp/core';
import { RawAgent } from '../helpers/raw-agent.js';

t.test('remove, rename, UNSCOPED and REMOVED; a removed node stays out', async (t) => {
  const dir = workdir(t, 'lifecycle');
  const state = join(dir, 'ctl');
  const ctl = await startController(t, state);
  const cli = (...args: string[]) => meshpAsync(...args, '--state', state, '--controller', ctl.address);
  const admin = adminCalls(() => ctl);
  // Each admin call is asserted to succeed, as the CLI's exit code 0 was.
  const ok = async (what: string, call: Promise<unknown>) => await t.resolves(call, what);
  const policy = async (rules: { from: string; to: string }[], tag: string) => await ok(`policy set ${tag}`, admin.policy(rules));
  await policy([{ from: 'web', to: 'db' }], 'web-db');

  const [webToken, dbToken, opsToken] = await Promise.all(['web', 'db', 'ops'].map((x) => tokenFor(ctl, [x])));
  const web = startAgent(t, dir, 'web1', ctl.address, webToken);
  const db = startAgent(t, dir, 'db1', ctl.address, dbToken);
  const ops = startAgent(t, dir, 'ops1', ctl.address, opsToken);
  const all = [web, db, ops];
  const settled = (agents: AgentProc[]) =>
    waitUntil(`${agents.map((a) => a.name).join(', ')} at gap 0`, async () => {
      const nodes = await listNodes(ctl);
      return agents.every((a) => nodes.some((n) => n.name === a.name && n.gap === 0 && n.appliedVersion > 0)) && nodes;
    });
  await settled(all);
  for (const a of all) await a.proc.waitFor((l) => l.msg === 'applied');

  // UNSCOPED: the policy no longer lets web1 see db1.
  let mark = web.proc.lines.length;
  await policy([], 'none');
  const unscoped = await web.proc.waitFor((l) => l.msg === 'applied' && Number(l.unscoped) === 1, 15_000, mark);
  t.equal(unscoped.removed, 0, 'a policy change hides the peer: UNSCOPED, not REMOVED');
  mark = web.proc.lines.length;
  await policy([{ from: 'web', to: 'db' }], 'web-db-again');
  await web.proc.waitFor((l) => l.msg === 'applied' && Number(l.upserted) === 1, 15_000, mark);
  await settled(all);

  // REMOVED: db1 leaves. web1 (which sees it) is told; its stream ends; its credential is refused.
  mark = web.proc.lines.length;
  const ctlMark = ctl.proc.lines.length;
  const dbMark = db.proc.lines.length;
  const t0 = Date.now();
  await ok('node remove db1', admin.remove('db1'));
  const removed = await web.proc.waitFor((l) => l.msg === 'applied' && Number(l.removed) === 1, 15_000, mark);
  t.equal(removed.unscoped, 0, 'web1 got db1 removed with REMOVED');
  const removedAt = await ctl.proc.waitFor((l) => l.msg === 'node removed: credential and key revoked', 15_000, ctlMark);
  t.comment(
    `REMOVED applied by web1 ${Number(removed.time) - Number(removedAt.time)} ms after the controller removed db1 (${Date.now() - t0} ms from the admin call)`,
  );
  const refused = await db.proc.waitFor((l) => l.msg === 'controller refused', 15_000, dbMark);
  t.equal(refused.code, 'MESHP_NODE_REVOKED', 'the removed node is told why its stream ends');
  // Told MESHP_NODE_REVOKED, the agent leaves (issue 33): it takes away what the mesh added and exits 3, no reconnect.
  t.equal(await db.proc.exited, 3, "the removed node's agent exits 3");
  t.match(db.proc.stderr, /^MESHP_REMOVED: node db1 left network default \(removed by the controller: node db1 was removed from default\)/);
  t.notOk(
    (await listNodes(ctl)).some((n) => n.name === 'db1'),
    'node list no longer has db1',
  );
  const replayer = new RawAgent(ctl);
  t.teardown(() => replayer.link.close());
  const replay = await replayer.enrol(dbToken, 'db3').then(
    () => 'enrolled',
    (e: unknown) => (isMeshpError(e) ? `${e.code}: ${e.message}` : String(e)),
  );
  t.match(replay, /MESHP_TOKEN_INVALID: .*unknown/, "the removed node's spent token is gone from the store: a replay is unknown");

  // The next change is answered normally (it used to fail with "no node db1 in default").
  await t.resolves(
    admin.policy([
      { from: 'web', to: 'db' },
      { from: 'ops', to: 'web' },
    ]),
    'policy set after a removal',
  );

  // The revoked key cannot enrol again, even with a fresh token; a key in use cannot enrol twice.
  const reuse = async (name: string, from: AgentProc) => {
    mkdirSync(join(dir, name, 'state'), { recursive: true });
    copyFileSync(join(from.state, 'node.key'), join(dir, name, 'state', 'node.key'));
    return startAgent(t, dir, name, ctl.address, await tokenFor(ctl, ['db']));
  };
  // The two are independent: started side by side.
  const [again, twin] = await Promise.all([reuse('db2', db), reuse('ops2', ops)]);
  const [againExit, twinExit] = await Promise.all([again.proc.exited, twin.proc.exited]);
  t.not(againExit, 0, 'an agent with the revoked key is refused');
  t.match(again.proc.stderr + JSON.stringify(again.proc.lines), /MESHP_NODE_REVOKED/);
  t.not(twinExit, 0, 'an agent with the key of ops1 is refused');
  t.match(twin.proc.stderr + JSON.stringify(twin.proc.lines), /MESHP_KEY_IN_USE/);

  // Rename: web1 becomes www1; its peers see the old name go and the new one come in one delta.
  const opsMark = ops.proc.lines.length;
  mark = web.proc.lines.length;
  await ok('node rename web1 www1', admin.rename('web1', 'www1'));
  await web.proc.waitFor((l) => l.msg === 'renamed' && l.to === 'www1', 15_000, mark);
  const seen = await ops.proc.waitFor((l) => l.msg === 'applied' && Number(l.upserted) === 1 && Number(l.removed) === 1, 15_000, opsMark);
  t.ok(seen, 'ops1 got web1 removed and www1 upserted in one delta');
  await settled([{ ...web, name: 'www1' }, ops]);
  // The renamed agent reconnects under its new name.
  web.proc.kill('SIGKILL');
  await web.proc.exited;
  const ctlMark2 = ctl.proc.lines.length;
  startAgent(t, dir, 'web1', ctl.address);
  const hello = await ctl.proc.waitFor((l) => l.msg === 'sync stream opened', 20_000, ctlMark2);
  t.equal(hello.node, 'www1', 'the restarted agent says its new name');
  t.equal(hello.resume, true, 'and resumes where it was');

  const unasked = await cli('node', 'remove', 'ops1');
  t.not(unasked.code, 0, 'node remove without --yes off a terminal changes nothing');
  t.match(unasked.err, /MESHP_CONFIRM_NEEDED/);
});
