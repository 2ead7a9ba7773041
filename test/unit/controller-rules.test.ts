import t from 'tap';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StateDelta } from '@meshp/core';
import { DeltaApplier, REMOVAL_REASON, WIRE_MODE } from '@meshp/core/delta';
import { Controller, MemoryStore, SqliteControllerStore } from '@meshp/controller';
import { assertPrivate } from '../helpers/modes.js';

/** A network n with members x(a), y(b), z(c); policy a→b. */
function setup(options: { logDepth?: number } = {}) {
  const c = new Controller(new MemoryStore(), options);
  c.createNetwork('n');
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'] });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: ['b'] });
  c.join('n', { id: 'z', nodeKey: 'kz', tags: ['c'] });
  return c;
}

/** A change every node sees (lazy fan-out sends nothing for a change a node cannot see). */
function dns(c: Controller, i: number): void {
  c.setComponent('n', 'dns', { nameservers: [`10.0.0.${i + 1}`], searchDomains: [], records: [], domain: '', splits: [] });
}

/** Sends what the controller has for the node, applies it, acks it. */
function sync(c: Controller, agent: DeltaApplier, node: string): StateDelta | null {
  const d = c.deltaFor('n', node);
  if (!d) return null;
  const r = agent.receive(structuredClone(d));
  if (r.status === 'applied') c.ack('n', node, r.ack.appliedVersion, r.ack.stateHash);
  return d;
}

t.test('a peer the policy stops letting a node reach is UNSCOPED, a peer that leaves is REMOVED', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  t.ok(x.view.peer('y'));
  c.setPolicy('n', [{ from: 'a', to: 'c' }]);
  const d1 = sync(c, x, 'x')!;
  t.same(d1.removePeers, [{ id: 'y', reason: REMOVAL_REASON.UNSCOPED }]);
  t.same(
    d1.upsertPeers.map((p) => p.id),
    ['z'],
  );
  c.leave('n', 'z');
  const d2 = sync(c, x, 'x')!;
  t.same(d2.removePeers, [{ id: 'z', reason: REMOVAL_REASON.REMOVED }]);
});

t.test('a peer unscoped then rescoped comes back as an upsert', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.setPolicy('n', []);
  t.same(sync(c, x, 'x')!.removePeers, [{ id: 'y', reason: REMOVAL_REASON.UNSCOPED }]);
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  const d = sync(c, x, 'x')!;
  t.equal(d.fromVersion, 5, 'a delta, not a snapshot');
  t.same(
    d.upsertPeers.map((p) => p.id),
    ['y'],
  );
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash);
});

t.test('a view holds reachable peers and inbound-only ones, never any other', async (t) => {
  const c = setup();
  const y = new DeltaApplier();
  sync(c, y, 'y');
  t.same([...y.view.peers.keys()], ['x'], 'y sees x (x may reach y) and not z');
  t.equal(y.view.peer('x')?.inboundOnly, true, 'marked inbound only');
  const x = new DeltaApplier();
  sync(c, x, 'x');
  t.equal(x.view.peer('y')?.inboundOnly, false);
  t.notOk(x.view.peer('z'));
});

t.test('a key rotation reaches the peers that see the node as an upsert', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.rotateKey('n', 'y', 'ky2');
  c.rotateKey('n', 'z', 'kz2');
  const d = sync(c, x, 'x')!;
  t.same(
    d.upsertPeers.map((p) => [p.id, p.nodeKey]),
    [['y', 'ky2']],
    'z is out of scope: nothing about it',
  );
});

t.test('every change bumps the version; an agent left behind by the log gets a snapshot', async (t) => {
  const c = setup({ logDepth: 3 });
  const x = new DeltaApplier();
  sync(c, x, 'x');
  const v = c.stateVersion('n');
  c.setTags('n', 'z', ['b']);
  c.setComponent('n', 'dns', { nameservers: ['10.0.0.53'], searchDomains: ['mesh'], records: [], domain: '', splits: [] });
  t.equal(c.stateVersion('n'), v + 2);
  t.equal(sync(c, x, 'x')!.fromVersion, v, 'within the log: a delta');
  for (let i = 0; i < 4; i++) c.rotateKey('n', 'y', `k${i}`);
  const d = sync(c, x, 'x')!;
  t.equal(d.fromVersion, 0, 'the log no longer reaches back: a snapshot');
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash);
});

t.test('a log depth set on an existing network holds from then on, and cuts a longer log at once', async (t) => {
  const c = setup();
  t.equal(c.logDepth('n'), 1000, 'the default');
  const x = new DeltaApplier();
  const y = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, y, 'y');
  for (let i = 0; i < 3; i++) dns(c, i);
  sync(c, y, 'y');
  dns(c, 3);
  c.setLogDepth('n', 2);
  t.equal(c.logDepth('n'), 2);
  t.equal(sync(c, y, 'y')!.fromVersion, c.stateVersion('n') - 1, 'one change behind, within the two kept: a delta');
  t.equal(sync(c, x, 'x')!.fromVersion, 0, 'four changes behind: the log was cut, a snapshot');
  for (let i = 4; i < 8; i++) dns(c, i);
  t.equal(sync(c, y, 'y')!.fromVersion, 0, 'and it stays at two for the changes after');
  for (const bad of [0, -1, 2.5, NaN]) t.throws(() => c.setLogDepth('n', bad), { code: 'MESHP_USAGE' }, `${bad} refused`);
  t.equal(c.logDepth('n'), 2, 'a refused depth changes nothing');
});

t.test('an ack whose hash differs from the one computed for that version forces a snapshot', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.rotateKey('n', 'y', 'ky2');
  const d = c.deltaFor('n', 'x')!;
  t.not(d.fromVersion, 0);
  const r = c.ack('n', 'x', d.toVersion, 'not-the-hash');
  t.same(r, { accepted: false, snapshotPending: true });
  t.equal(c.listNodes('n').find((s) => s.name === 'x')!.appliedVersion, 4, 'the applied version did not move');
  t.equal(c.deltaFor('n', 'x')!.fromVersion, 0, 'snapshot');
});

t.test('only an ack moves the applied version; the gap is state_version minus applied_version', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  const d = c.deltaFor('n', 'x')!;
  t.equal(c.listNodes('n')[0]!.gap, c.stateVersion('n'), 'sent is not applied');
  const r = x.receive(d);
  if (r.status === 'applied') c.ack('n', 'x', r.ack.appliedVersion, r.ack.stateHash);
  t.equal(c.listNodes('n')[0]!.gap, 0);
  c.setPolicy('n', []);
  t.equal(c.listNodes('n')[0]!.gap, 1);
  t.equal(c.deltaFor('n', 'x')!.fromVersion, d.toVersion, 'deltas continue from what was sent');
  t.equal(c.deltaFor('n', 'x'), null, 'nothing more to send');
});

t.test('every declaration sent carries the node mode and its taken modules', async (t) => {
  const c = setup();
  c.defineModule('n', { name: 'web', files: [{ path: '/etc/web.conf', content: 'x' }] });
  c.setMode('n', 'x', 'adopted');
  const x = new DeltaApplier();
  sync(c, x, 'x');
  t.equal(x.view.components.declaration?.mode, WIRE_MODE.ADOPTED);
  c.assignModule('n', 'x', 'web');
  let d = sync(c, x, 'x')!;
  t.same(
    d.declaration?.modules.map((m) => [m.name, m.taken]),
    [['web', false]],
  );
  t.equal(d.declaration?.mode, WIRE_MODE.ADOPTED);
  c.takeModule('n', 'x', 'web');
  d = sync(c, x, 'x')!;
  t.same(
    d.declaration?.modules.map((m) => [m.name, m.taken, m.files.length]),
    [['web', true, 1]],
  );
  t.equal(d.declaration?.mode, WIRE_MODE.ADOPTED);
  c.setMode('n', 'x', 'converged');
  t.equal(sync(c, x, 'x')!.declaration?.mode, WIRE_MODE.CONVERGED);
  c.rotateKey('n', 'y', 'k9');
  t.equal(sync(c, x, 'x')!.declaration, undefined, 'unchanged: absent');
  t.throws(() => c.takeModule('n', 'x', 'db'), { code: 'MESHP_USAGE' }, 'taking needs assigning first');
});

t.test('a token carries the mode: an enrolled node is adopted when the token says so', async (t) => {
  const c = setup();
  const tok = c.createToken('n', { mode: 'adopted', tags: ['b'] });
  const { member } = c.enrol(tok.token, { id: 'w', nodeKey: 'kw' });
  t.equal(member.mode, 'adopted');
  t.same(member.tags, ['b']);
  t.throws(() => c.enrol(tok.token, { id: 'v', nodeKey: 'kv' }), { code: 'MESHP_TOKEN_INVALID' }, 'one time');
});

/** A SQLite-backed controller in a folder of its own, network n with x and y both tagged a, policy a→a. */
function sqliteSetup(t: { teardown(fn: () => void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-ctl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const c = new Controller(new SqliteControllerStore(file));
  c.createNetwork('n');
  c.setPolicy('n', [{ from: 'a', to: 'a' }]);
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'] });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: ['a'] });
  return { dir, file, c };
}

t.test('a controller restarted from its SQLite state resumes with a delta when the hello matches', async (t) => {
  const { dir, file, c: first } = sqliteSetup(t);
  assertPrivate(t, dir);
  let c = first;
  const x = new DeltaApplier();
  const r = x.receive(c.deltaFor('n', 'x')!);
  if (r.status === 'applied') c.ack('n', 'x', r.ack.appliedVersion, r.ack.stateHash);
  c.join('n', { id: 'z', nodeKey: 'kz', tags: ['a'] });
  c.close();

  c = new Controller(new SqliteControllerStore(file));
  t.teardown(() => c.close());
  t.equal(c.stateVersion('n'), 4);
  const hello = x.hello();
  t.same(c.hello('n', 'x', hello.appliedVersion, hello.stateHash), { accepted: true, snapshotPending: false });
  const d = c.deltaFor('n', 'x')!;
  t.equal(d.fromVersion, 3);
  t.same(
    d.upsertPeers.map((p) => p.id),
    ['z'],
  );
  t.equal(c.hello('n', 'x', 3, 'wrong').snapshotPending, true, 'a hello with another hash gets a snapshot');
});

t.test('a controller restored from an older copy of its state moves past the versions agents saw; they take its snapshot and follow on', async (t) => {
  const { dir, file, c: first } = sqliteSetup(t);
  let c = first;
  const backup = join(dir, 'backup.db');
  const x = new DeltaApplier();
  const y = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, y, 'y');
  c.close();
  copyFileSync(file, backup); // the backup: version 3

  c = new Controller(new SqliteControllerStore(file));
  c.join('n', { id: 'z', nodeKey: 'kz', tags: ['a'] });
  c.setTags('n', 'z', ['a', 'b']);
  sync(c, x, 'x');
  t.equal(x.appliedVersion, 5, 'x saw versions 4 and 5, with z');
  c.close();

  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  copyFileSync(backup, file); // restored: version 3, no z
  c = new Controller(new SqliteControllerStore(file));
  t.teardown(() => c.close());
  t.equal(c.stateVersion('n'), 3);

  const hx = x.hello();
  const r = c.hello('n', 'x', hx.appliedVersion, hx.stateHash);
  t.same(r, { accepted: false, snapshotPending: true, movedAhead: { from: 3, to: 6 } }, 'x is ahead: the network moves to 6');
  const snap = c.deltaFor('n', 'x')!;
  t.same([snap.fromVersion, snap.toVersion], [0, 6], 'a snapshot at 6');
  const got = x.receive(structuredClone(snap));
  t.equal(got.status, 'applied', 'x takes it: it is newer than its view');
  if (got.status === 'applied') t.same(c.ack('n', 'x', got.ack.appliedVersion, got.ack.stateHash), { accepted: true, snapshotPending: false });
  t.same([...x.view.peers.keys()], ['y'], 'z, of the lost history, is gone from x');
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash);

  const hy = y.hello();
  t.equal(c.hello('n', 'y', hy.appliedVersion, hy.stateHash).movedAhead, undefined, 'y at 3 was never ahead');
  // The log no longer bridges 3 to 6, but y's view (of the history kept) is the view at 6, by hash: nothing to send (issue 15).
  t.equal(c.deltaFor('n', 'y'), null, 'the log no longer bridges 3 to 6, but y holds the view at 6 (its hash checked): nothing to send');
  t.equal(c.listNodes('n').find((n) => n.name === 'y')!.gap, 0, 'y is not behind');

  c.join('n', { id: 'w', nodeKey: 'kw', tags: ['a'] });
  const d = sync(c, x, 'x')!;
  t.same([d.fromVersion, d.toVersion], [6, 7], 'the next change reaches x as a delta');
  t.same([...x.view.peers.keys()].sort(), ['w', 'y']);
  const dy = sync(c, y, 'y')!;
  t.same([dy.fromVersion, dy.toVersion], [3, 7], 'and y as a delta from the version it holds');
  t.equal(y.view.hash(), c.snapshotOf('n', 'y').hash, "y's view is the snapshot's");
  t.equal(c.stateVersion('n'), 7);

  t.throws(() => c.hello('n', 'x', 2 ** 53, 'h'), { code: 'MESHP_MESSAGE_MALFORMED' }, 'a version no controller sends is refused, not followed');
  t.equal(c.stateVersion('n'), 7);
});

t.test('doctor shows the deltas sent and whether the agent hash matched', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.rotateKey('n', 'y', 'k2');
  sync(c, x, 'x');
  const doc = c.doctor('n', 'x');
  t.same(
    doc.recentDeltas.map((d) => [d.fromVersion, d.toVersion]),
    [
      [0, 4],
      [4, 5],
    ],
  );
  t.equal(doc.hashMatches, true);
  t.equal(doc.node.gap, 0);
});

t.test("a catalogue module's ports are read from each node's settings in every declaration", async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n', { privateRange: '10.77.0.0/24' });
  c.join('n', { id: 'ctl', nodeKey: 'k1', settings: { ports: { registry: 15001 }, privateRange: '10.77.0.0/24' } });
  c.defineModule('n', {
    name: 'registry',
    containers: [{ name: 'meshp-registry', image: 'lab/busybox:1', ports: [{ container: 5000, host: '{{ports.registry}}' as unknown as number }] }],
    openings: [{ port: '{{ports.registry}}' as unknown as number, path: 'forwarded', from: ['{{privateRange}}'] }],
  });
  c.assignModule('n', 'ctl', 'registry');
  const agent = new DeltaApplier();
  const d = c.deltaFor('n', 'ctl')!;
  agent.receive(structuredClone(d));
  const m = d.declaration?.modules.find((x) => x.name === 'registry');
  t.equal(m?.containers[0]?.ports[0]?.host, 15001, 'the container publishes the node port, not a catalogue default');
  t.equal(m?.openings[0]?.port, 15001);
  t.same(m?.openings[0]?.from, ['10.77.0.0/24']);
});

t.test('an enrolment token is kept only as its hash: a copy of the state enrols no one', async (t) => {
  const store = new MemoryStore();
  const c = new Controller(store);
  c.createNetwork('n');
  const { token } = c.createToken('n', { mode: 'adopted' });
  const kept = JSON.stringify(store.load());
  t.notOk(kept.includes(token), 'the raw token is nowhere in the stored state');
  t.throws(() => c.enrol(JSON.parse(kept).tokens[0].token, { id: 'thief', nodeKey: 'k' }), { code: 'MESHP_TOKEN_INVALID' }, 'the stored hash is not a token');
  const { member } = c.enrol(token, { id: 'x', nodeKey: 'kx' });
  t.equal(member.mode, 'adopted');
  t.throws(() => c.enrol(token, { id: 'y', nodeKey: 'ky' }), { code: 'MESHP_TOKEN_INVALID' }, 'used once');
});

t.test('a module not in the catalogue cannot be assigned', async (t) => {
  const c = setup();
  t.throws(() => c.assignModule('n', 'x', 'nope'), { code: 'MESHP_NOT_FOUND', message: /no module nope/ });
  t.same(c.member('n', 'x')!.assigned, []);
});

t.test('lazy fan-out: a change a node cannot see sends it nothing; its next delta covers every version since', async (t) => {
  const c = setup();
  const [x, y, z] = [new DeltaApplier(), new DeltaApplier(), new DeltaApplier()];
  sync(c, x, 'x');
  sync(c, y, 'y');
  sync(c, z, 'z');
  const at = c.stateVersion('n');
  for (let i = 0; i < 3; i++) c.rotateKey('n', 'y', `ky${i}`);
  t.equal(c.deltaFor('n', 'z'), null, 'z sees neither x nor y: nothing to send');
  t.ok(c.listNodes('n').find((n) => n.name === 'z')!.gap === 0, 'and z is not behind');
  t.equal(c.listNodes('n').find((n) => n.name === 'x')!.gap, 3, 'x sees y: it is behind until it applies');
  t.ok(sync(c, x, 'x'), 'x gets one delta');
  c.setTags('n', 'z', ['b']);
  const d = sync(c, z, 'z')!;
  t.equal(d.fromVersion, at, 'z: one delta from the version it applied, over every version since');
  t.equal(d.toVersion, c.stateVersion('n'));
  t.same(
    d.upsertPeers.map((p) => p.id),
    ['x'],
    'x (a→b) now reaches z',
  );
  t.equal(z.view.hash(), c.snapshotOf('n', 'z').hash, 'the view built so equals the snapshot');
  t.equal(c.listNodes('n').find((n) => n.name === 'x')!.gap, 1, 'x sees z come in: behind by that version');
  sync(c, x, 'x');
  t.equal(c.deltaFor('n', 'y'), null, 'y sees neither change');
  t.same(
    c.listNodes('n').map((n) => n.gap),
    [0, 0, 0],
  );
});
