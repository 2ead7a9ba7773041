/**
 * Issue 25, the seed-000 rule for names: a node's names are the peers of its view (and the
 * foundation names of the control-node), so a name hidden by the policy is never in its view, never
 * on the wire to it, never in its resolver's table; a policy change that hides a peer takes its name
 * away in the same delta; a change of the DNS settings is sent only where answers change.
 */
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { persistView } from '@meshp/core/agent';
import { SqliteHostStore } from '@meshp/state-sqlite';
import type { StateDelta } from '@meshp/core';
import { CONTROL_NODE_TAG, DeltaApplier, dnsForRevision, REMOVAL_REASON } from '@meshp/core/delta';
import { readDnsFile } from '@meshp/core/schema';
import { Controller, MemoryStore } from '@meshp/controller';
import { nameTable } from '@meshp/dns-resolver';
import { StateDelta as WireDelta } from '@meshp/protocol';

const HIDDEN = 'hidden-vault';

/** A network n: control-node cn (store and registry assigned), web (tag a), db (tag b), the hidden one (tag secret); policy a→b. */
function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.defineModule('n', { name: 'store' });
  c.defineModule('n', { name: 'registry' });
  c.join('n', { id: 'cn', nodeKey: 'kcn', tags: [CONTROL_NODE_TAG] });
  c.assignModule('n', 'cn', 'store');
  c.assignModule('n', 'cn', 'registry');
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  c.join('n', { id: 'web', nodeKey: 'kweb', tags: ['a'] });
  c.join('n', { id: 'db', nodeKey: 'kdb', tags: ['b'] });
  c.join('n', { id: HIDDEN, nodeKey: 'khid', tags: ['secret'] });
  return c;
}

/** Sends what the controller has for the node, as bytes on the wire, decodes, applies and acks it. */
function sync(c: Controller, agent: DeltaApplier, node: string, wire: Buffer[]): StateDelta | null {
  const d = c.deltaFor('n', node);
  if (!d) return null;
  const bytes = Buffer.from(WireDelta.encode(d as never).finish());
  wire.push(bytes);
  const r = agent.receive(WireDelta.decode(bytes) as unknown as StateDelta);
  if (r.status !== 'applied') throw new Error(`not applied: ${JSON.stringify(r)}`);
  c.ack('n', node, r.ack.appliedVersion, r.ack.stateHash);
  return d;
}

const names = (a: DeltaApplier): string[] => [...nameTable(a.view).names.keys()].sort();

t.test('a name hidden by the policy is in no view, on no wire, in no table; it comes and goes with its peer in one delta', async (t) => {
  const c = setup();
  const web = new DeltaApplier();
  const wire: Buffer[] = [];
  sync(c, web, 'web', wire);
  t.same(names(web), ['cn.n.mesh', 'db.n.mesh', 'registry.n.mesh', 'store.n.mesh', 'web.n.mesh'], 'its own, its peers, the foundation names');
  t.equal(nameTable(web.view).names.get('store.n.mesh')?.a[0], c.member('n', 'cn')!.addresses[0], 'the store answers the control-node');

  // The operator's records reach every node; the hidden peer's name stays out.
  c.setDns('n', readDnsFile({ records: [{ name: 'www', type: 'CNAME', value: 'db' }] }));
  const d1 = sync(c, web, 'web', wire)!;
  t.ok(d1.dns, 'the DNS component was sent');
  t.ok(nameTable(web.view).names.get('www.n.mesh')?.cname === 'db.n.mesh');

  // The policy lets web see the hidden one: its name arrives with the peer.
  c.setPolicy('n', [
    { from: 'a', to: 'b' },
    { from: 'a', to: 'secret' },
  ]);
  const d2 = sync(c, web, 'web', wire)!;
  t.same(
    d2.upsertPeers.map((p) => p.id),
    [HIDDEN],
  );
  t.equal(d2.dns, undefined, 'no DNS component: the names come with the peers');
  t.ok(names(web).includes(`${HIDDEN}.n.mesh`));

  // And hides it again: the name leaves in that same delta.
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  const d3 = sync(c, web, 'web', wire)!;
  t.same(d3.removePeers, [{ id: HIDDEN, reason: REMOVAL_REASON.UNSCOPED }]);
  t.notOk(names(web).includes(`${HIDDEN}.n.mesh`));

  // A fresh node under the hiding policy: its snapshot never carries the name.
  const db = new DeltaApplier();
  const dbWire: Buffer[] = [];
  sync(c, db, 'db', dbWire);
  t.notOk(
    dbWire.some((b) => b.includes(HIDDEN)),
    'not on the wire to db',
  );
  t.notOk(JSON.stringify(db.view.toSnapshot()).includes(HIDDEN), 'not in its view');
  t.notOk(names(db).includes(`${HIDDEN}.n.mesh`), 'not in its resolver table');
  // On disk: db's view as the agent keeps it (state-sqlite, per peer), every file of its state folder read as bytes.
  const dir = mkdtempSync(join(tmpdir(), 'meshp-dns-disk-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteHostStore(dir);
  await persistView(store, db.view, null);
  const kept = await store.loadView!();
  await store.close();
  t.ok(
    kept?.upsertPeers.some((p) => p.id === 'web'),
    'the view was kept',
  );
  t.notOk(
    readdirSync(dir).some((f) => readFileSync(join(dir, f)).includes(HIDDEN)),
    'not in any file of its state folder',
  );
  // web's wire carried it only between the policy that showed it and the one that hid it.
  t.same(
    wire.map((b) => b.includes(HIDDEN)),
    [false, false, true, true],
  );
});

t.test('a rename and a removal move the names in the same delta; the DNS settings go to every node whose answers change', async (t) => {
  const c = setup();
  const web = new DeltaApplier();
  sync(c, web, 'web', []);
  c.renameNode('n', 'db', 'db2');
  const d = sync(c, web, 'web', [])!;
  t.equal(d.dns, undefined);
  t.ok(names(web).includes('db2.n.mesh'));
  t.notOk(names(web).includes('db.n.mesh'));
  c.leave('n', 'db2');
  sync(c, web, 'web', []);
  t.notOk(names(web).includes('db2.n.mesh'));

  const preview = c.setDns('n', readDnsFile({ domain: 'corp.mesh' }), true);
  t.same(preview.changedNodes, ['cn', HIDDEN, 'web'], 'the preview names every node: the domain changes all answers');
  t.equal(sync(c, web, 'web', []), null, 'a preview changed nothing');
  t.same(c.setDns('n', readDnsFile({ domain: 'corp.mesh' }), true).changedNodes, ['cn', HIDDEN, 'web']);
  c.setDns('n', readDnsFile({ domain: 'corp.mesh' }));
  sync(c, web, 'web', []);
  t.ok(names(web).includes('web.corp.mesh'));
  t.same(c.setDns('n', readDnsFile({ domain: 'corp.mesh' }), true).changedNodes, [], 'the same DNS again: no node answers differently');
});

t.test('an agent of an older revision acks a hash over the DNS fields it knows', async (t) => {
  const c = setup();
  c.setDns('n', readDnsFile({ split: [{ domain: 'corp.example', nameservers: ['10.9.0.53'] }] }));
  const d = c.deltaFor('n', 'web')!;
  t.equal(d.dns?.splits.length, 1);
  const old = dnsForRevision(d.dns!, 2);
  t.same(old.splits, [], 'revision 2 decodes no split');
  t.equal(old.domain, '');
});

t.test('dns set refuses what is not a network DNS, naming the field', async (t) => {
  const c = setup();
  t.throws(() => readDnsFile({ records: [{ name: 'x', type: 'MX', value: 'y' }] }), { code: 'MESHP_DNS_INVALID' });
  t.throws(() => readDnsFile({ nameservers: ['dns.google'] }), { code: 'MESHP_DNS_INVALID', message: /nameservers/ });
  t.throws(() => readDnsFile({ recordz: [] }), { code: 'MESHP_DNS_INVALID', message: /recordz/ });
  t.throws(
    () =>
      readDnsFile({
        records: [
          { name: 'x', type: 'CNAME', value: 'db' },
          { name: 'x', type: 'A', value: '10.0.0.1' },
        ],
      }),
    { code: 'MESHP_DNS_INVALID', message: /CNAME stands alone/ },
  );
  t.throws(() => c.setDns('n', readDnsFile({ records: [{ name: 'db', type: 'A', value: '10.0.0.1' }] })), {
    code: 'MESHP_DNS_INVALID',
    message: /name of a node/,
  });
  t.throws(() => readDnsFile({ records: Array.from({ length: 10_001 }, (_, i) => ({ name: `r${i}`, type: 'A', value: '10.0.0.1' })) }), {
    code: 'MESHP_DNS_INVALID',
  });
});
