/**
 * Issue 28 (ADR 0042): reusable and ephemeral enrolment tokens, tagged, against real controllers
 * over gRPC on 127.0.0.1 (SQLite, then two replicas on one PostgreSQL of the test's own), with
 * SimAgents as the nodes. A reusable token enrols as many nodes as its count and refuses the next
 * (MESHP_TOKEN_USED_UP), its count shown by `token list --json`; two replicas enrolling with one
 * token at once never use it past its count (the count's conditional update); a node an ephemeral
 * token enrolled is removed once its stream is gone for its grace — one delta to its peers, one
 * audit row by the actor `ephemeral` — and one whose stream another replica holds is not; a token's
 * tags are checked for their form and never the control-node's. `node tag` on PostgreSQL with two
 * replicas: the change seen by both, one audit row.
 */
import t from 'tap';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { isMeshpError } from '@meshp/core';
import { meshpAsync, replicaState, startController, tokenFor, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { fileBudget, until } from '../helpers/budget.js';

fileBudget(600);

interface TokenJson {
  id: string;
  state: string;
  reusable: boolean;
  uses: number;
  maxUses: number;
  ephemeral: boolean;
  ephemeralGraceSeconds: number | null;
  tags: string[];
}
interface NodeJson {
  name: string;
  tags: string[];
  ephemeral: boolean;
  ephemeralGraceSeconds: number | null;
  connected: boolean;
}
interface AuditJson {
  actor: string;
  method: string;
  node: string | null;
  summary: string;
}

const cliOf = (ctl: ControllerProc) => {
  const cli = (...args: string[]) => meshpAsync(...args, '--controller', ctl.address, '--state', ctl.state);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return JSON.parse(r.out) as T;
  };
  return { cli, json };
};

/** How an enrolment ended: 'ok' or its code. */
const enrolled = (x: SimAgent, token: string): Promise<string> =>
  x.enrol(token).then(
    () => 'ok',
    (e: unknown) => (isMeshpError(e) ? e.code : String(e)),
  );

const audit = async (ctl: ControllerProc): Promise<AuditJson[]> =>
  (await (await ctl.admin!()).call('listAudit', { network: 'default', since: '', node: '', limit: 0 })).entries as AuditJson[];

const nodesOf = async (ctl: ControllerProc): Promise<NodeJson[]> =>
  (await (await ctl.admin!()).call('listNodes', { network: 'default' })).nodes.map((n) => ({
    name: n.name,
    tags: n.tags,
    ephemeral: n.ephemeral,
    ephemeralGraceSeconds: n.ephemeral ? n.ephemeralGraceSeconds : null,
    connected: n.connected,
  }));

t.test('a reusable token enrols its count and refuses the next; an ephemeral node goes after its grace; tags are checked (SQLite)', async (t) => {
  const dir = workdir(t, 'tokens-reusable');
  const ctl = await startController(t, join(dir, 'ctl'), ['--ephemeral-sweep-ms', '200']);
  const { fingerprint } = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
  const { cli, json } = cliOf(ctl);
  const agents: SimAgent[] = [];
  const agent = (name: string) => {
    const x = new SimAgent(name, ctl.address, fingerprint);
    agents.push(x);
    return x;
  };
  t.teardown(() => agents.forEach((x) => x.close()));

  // Tags: the control-node's is refused (coded), as is one not of a policy's form; a flag without its mode is a usage error.
  const reserved = await cli('token', 'create', '--tag', 'web', '--tag', 'control-node');
  t.not(reserved.code, 0);
  t.match(reserved.err, /MESHP_TAG_RESERVED/, "the control-node's tag is refused");
  const bad = await cli('token', 'create', '--tag', 'no spaces');
  t.not(bad.code, 0);
  t.match(bad.err, /MESHP_USAGE.*not valid/, 'a tag not of the form is refused');
  t.match((await cli('token', 'create', '--uses', '3')).err, /MESHP_USAGE.*--reusable/, '--uses without --reusable');
  t.match((await cli('token', 'create', '--reusable', '--uses', '0')).err, /MESHP_USAGE/, '--uses 0');
  t.match((await cli('token', 'create', '--grace', '5s')).err, /MESHP_USAGE.*--ephemeral/, '--grace without --ephemeral');
  t.same(
    (await json<{ tokens: TokenJson[] }>('token', 'list')).tokens,
    [],
    'no token was made by a refused create (MESHP_TAG_RESERVED and the usage errors change nothing)',
  );

  // Reusable: two uses, then MESHP_TOKEN_USED_UP; the count shown.
  const made = await json<{ token: string; id: string; reusable: boolean }>('token', 'create', '--reusable', '--uses', '2', '--tag', 'web');
  t.equal(made.reusable, true);
  t.equal(await enrolled(agent('r1'), made.token), 'ok');
  let listed = (await json<{ tokens: TokenJson[] }>('token', 'list')).tokens.find((x) => x.id === made.id)!;
  t.match(listed, { state: 'in-use', reusable: true, uses: 1, maxUses: 2, ephemeral: false, tags: ['web'] }, 'one of two used: in use');
  t.equal(await enrolled(agent('r2'), made.token), 'ok');
  t.equal(await enrolled(agent('r3'), made.token), 'MESHP_TOKEN_USED_UP', 'the third enrolment is refused, coded');
  listed = (await json<{ tokens: TokenJson[] }>('token', 'list')).tokens.find((x) => x.id === made.id)!;
  t.match(listed, { state: 'used', uses: 2, maxUses: 2 }, 'used up: 2 of 2');
  t.same(
    (await nodesOf(ctl)).map((n) => [n.name, n.tags]),
    [
      ['r1', ['web']],
      ['r2', ['web']],
    ],
    'the refused one is no member',
  );
  t.match((await cli('token', 'revoke', made.id, '--yes')).err, /MESHP_TOKEN_USED/, 'a used-up token is not revoked: it enrols no one already');

  // Ephemeral: e1 and e2 by one reusable ephemeral token, p1 kept; the policy lets p1 see them.
  await (await ctl.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports: [] }] });
  const eph = await json<{ token: string; id: string }>('token', 'create', '--reusable', '--uses', '5', '--ephemeral', '--grace', '2s', '--tag', 'all');
  const kept = await tokenFor(ctl, ['all']);
  const p1 = agent('p1');
  const e1 = agent('e1');
  const e2 = agent('e2');
  t.equal(await enrolled(p1, kept), 'ok');
  t.equal(await enrolled(e1, eph.token), 'ok');
  t.equal(await enrolled(e2, eph.token), 'ok');
  for (const x of [p1, e1, e2]) x.open();
  await until('p1 sees e1 and e2', () => !!p1.applier.view.peer('e1') && !!p1.applier.view.peer('e2'), 60);
  const rows = await json<{ nodes: NodeJson[] }>('node', 'list');
  t.match(
    rows.nodes.filter((n) => ['e1', 'e2', 'p1'].includes(n.name)).map((n) => [n.name, n.ephemeral, n.ephemeralGraceSeconds]),
    [
      ['e1', true, 2],
      ['e2', true, 2],
      ['p1', false, null],
    ],
    'node list marks the ephemeral nodes, with their grace',
  );
  t.match((await cli('node', 'list')).out, /e1 .*ephemeral: removed after 2s without a stream/, 'and says so in its table');
  t.match(
    (await json<{ tokens: TokenJson[] }>('token', 'list')).tokens.find((x) => x.id === eph.id),
    { ephemeral: true, ephemeralGraceSeconds: 2, uses: 2, maxUses: 5 },
  );

  const before = p1.deltas.length;
  e1.close();
  await until('e1 removed after its grace', async () => !(await nodesOf(ctl)).some((n) => n.name === 'e1'), 60);
  await until('p1 told e1 left', () => !p1.applier.view.peer('e1'), 30);
  const removals = p1.deltas.slice(before).filter((d) => d.removePeers.some((r) => r.id === 'e1'));
  t.equal(removals.length, 1, 'its peers get one delta removing it');
  // e2's stream stays open: it stays a member however long (three of its graces here).
  await new Promise((r) => setTimeout(r, 6_000));
  t.ok(
    (await nodesOf(ctl)).some((n) => n.name === 'e2' && n.connected),
    'an ephemeral node whose stream is open stays',
  );
  const rows2 = await audit(ctl);
  const reaped = rows2.filter((e) => e.method === 'removeNode');
  t.match(reaped, [{ actor: 'ephemeral', node: 'e1', summary: /ephemeral/ }], 'the removal is in the audit log once, by the actor ephemeral');
  // Its credential and key are revoked, as node remove does: the same key enrols no more (a new key does).
  const again = agent('e1');
  (again as { key: SimAgent['key'] }).key = e1.key;
  t.equal(await enrolled(again, eph.token), 'MESHP_NODE_REVOKED', "the removed node's key is revoked");
});

const missing = postgresMissing();
if (missing) {
  t.test('two replicas on PostgreSQL', { skip: `needs a PostgreSQL cluster of its own: ${missing}` }, async () => undefined);
} else {
  t.test(
    'two replicas on one PostgreSQL: one token never used past its count; an ephemeral node held by the other replica stays; node tag seen by both, one audit row',
    async (t) => {
      const cluster = startPostgres(t);
      const url = await cluster.createDb('meshp');
      const dir = workdir(t, 'tokens-pg');
      const flags = ['--store', url, '--sync-flush-ms', '200', '--ephemeral-sweep-ms', '300'];
      const a = await startController(t, join(dir, 'a'), flags);
      replicaState(join(dir, 'a'), join(dir, 'b'));
      const b = await startController(t, join(dir, 'b'), flags);
      const { fingerprint } = readAdminCredential(join(dir, 'a', ADMIN_CREDENTIAL_FILE));
      const agents: SimAgent[] = [];
      t.teardown(() => agents.forEach((x) => x.close()));
      const on = (name: string, ctl: ControllerProc) => {
        const x = new SimAgent(name, ctl.address, fingerprint);
        agents.push(x);
        return x;
      };
      const { json: jsonA, cli: cliA } = cliOf(a);
      const { json: jsonB } = cliOf(b);

      // One token of 3 uses, 8 enrolments at once, half through each replica: exactly 3 take it.
      const made = await jsonA<{ token: string; id: string }>('token', 'create', '--reusable', '--uses', '3', '--tag', 'all');
      const racers = Array.from({ length: 8 }, (_, i) => on(`c${i}`, i % 2 ? a : b));
      const outcomes = await Promise.all(racers.map((x) => enrolled(x, made.token)));
      t.equal(outcomes.filter((o) => o === 'ok').length, 3, `three enrolments took the token (${outcomes.join(' ')})`);
      t.same(
        outcomes.filter((o) => o !== 'ok'),
        Array(5).fill('MESHP_TOKEN_USED_UP'),
        'the others are refused, coded',
      );
      for (const j of [jsonA, jsonB]) {
        const listed = (await j<{ tokens: TokenJson[] }>('token', 'list')).tokens.find((x) => x.id === made.id);
        t.match(listed, { uses: 3, maxUses: 3, state: 'used' }, 'each replica shows 3 of 3 used');
      }
      const members = (await cluster.query('meshp', 'SELECT count(*)::int AS n FROM members'))[0]!.n;
      t.equal(members, 3, 'three members in the database');
      const uses = (await cluster.query('meshp', 'SELECT count(*)::int AS n FROM hosting_token_uses'))[0]!.n;
      t.equal(uses, 3, 'three uses recorded');

      // Ephemeral with a grace of 1 s: h1's stream is on B only; A must not remove it.
      const eph = await jsonA<{ token: string }>('token', 'create', '--ephemeral', '--grace', '1s', '--tag', 'all');
      const h1 = on('h1', b);
      t.equal(await enrolled(h1, eph.token), 'ok', 'enrolled through B with a token made through A');
      h1.open();
      await until('h1 connected on B', async () => (await nodesOf(b)).some((n) => n.name === 'h1' && n.connected), 60);
      await new Promise((r) => setTimeout(r, 5_000));
      t.ok(
        (await nodesOf(a)).some((n) => n.name === 'h1' && n.ephemeral),
        'after five of its graces, h1 (held by B) is still a member, as A sees it',
      );
      h1.close();
      await until('h1 removed', async () => !(await nodesOf(a)).some((n) => n.name === 'h1') && !(await nodesOf(b)).some((n) => n.name === 'h1'), 60);
      await new Promise((r) => setTimeout(r, 1_500));
      t.equal(
        (await audit(b)).filter((e) => e.method === 'removeNode' && e.node === 'h1' && e.actor === 'ephemeral').length,
        1,
        'removed once: one audit row, whichever replica did it',
      );

      // node tag through A (part of issue 28 on PostgreSQL): B sees the new tags, the audit log has one row.
      const name = racers[outcomes.indexOf('ok')]!.name;
      const r = await cliA('node', 'tag', name, 'all', 'db', '--yes');
      t.equal(r.code, 0, r.err);
      await until('B shows the tags', async () => (await nodesOf(b)).find((n) => n.name === name)?.tags.join(',') === 'all,db', 30);
      t.same((await nodesOf(a)).find((n) => n.name === name)?.tags, ['all', 'db'], 'A shows them too');
      const tagged = (await audit(b)).filter((e) => e.method === 'setTags');
      t.match(tagged, [{ node: name, actor: 'admin', summary: /all -> all,db/ }], 'one audit row for the change, read through B');
      const rowsInDb = (await cluster.query('meshp', "SELECT count(*)::int AS n FROM audit_log WHERE method = 'setTags'"))[0]!.n;
      t.equal(rowsInDb, 1, 'one row in the database');
    },
  );
}
