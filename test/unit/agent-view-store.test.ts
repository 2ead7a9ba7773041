/**
 * The agent persists only what a delta changed (issue 15): with the state-sqlite host store, a
 * one-peer delta writes one peer row (the view is kept per peer, not as one document), a removal or
 * an unscoping deletes one row, a component change writes that component; and the view read back
 * from the rows is the view applied, hash for hash, after every step.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Peer, StateDelta, ViewWrite } from '@meshp/core';
import { VIEW_KEY, loadView, persistView } from '@meshp/core/agent';
import { DeltaApplier, REMOVAL_REASON } from '@meshp/core/delta';
import { SqliteHostStore } from '@meshp/state-sqlite';

const peer = (i: number, tag = 'a'): Peer => ({
  id: `p${i}`,
  nodeKey: `k${i}`,
  addresses: [`100.96.${i >> 8}.${i & 255}`],
  tags: [tag],
  endpoints: [],
  inboundOnly: false,
});

t.test('a delta writes the peers and components it changed, and the rows read back are the view', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-viewstore-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteHostStore(dir);
  t.teardown(() => store.close());
  const writes: ViewWrite[] = [];
  const save = store.saveView.bind(store);
  store.saveView = async (w: ViewWrite) => {
    writes.push(w);
    await save(w);
  };
  // An older agent's single record, to be replaced by the rows.
  await store.setValue(VIEW_KEY, { fromVersion: 0, toVersion: 1, upsertPeers: [], removePeers: [], network: 'n' });

  const a = new DeltaApplier();
  const apply = async (d: StateDelta, full: boolean) => {
    const r = a.receive(d);
    if (r.status !== 'applied') throw new Error(r.status);
    await persistView(store, a.view, full ? null : r.change, { 'agent.recent': a.recent });
    const back = new DeltaApplier();
    const { snapshot, perPeer } = await loadView(store);
    back.restore(snapshot!);
    t.ok(perPeer, 'read back from the rows');
    t.equal(back.view.hash(), a.view.hash(), `version ${d.toVersion}: the view read back has the hash of the view applied`);
    t.equal(back.appliedVersion, a.appliedVersion);
    return writes.at(-1)!;
  };

  const snapshot: StateDelta = {
    fromVersion: 0,
    toVersion: 2,
    network: 'n',
    upsertPeers: Array.from({ length: 300 }, (_, i) => peer(i)),
    removePeers: [],
    dns: { nameservers: ['10.0.0.1'], searchDomains: [], records: [], domain: '', splits: [] },
  };
  let w = await apply(snapshot, true);
  t.equal(w.upsert.length, 300, 'a snapshot writes the whole view');
  t.equal(await store.getValue(VIEW_KEY), null, 'and the older single record is gone');

  w = await apply({ fromVersion: 2, toVersion: 3, network: 'n', upsertPeers: [peer(7, 'b')], removePeers: [] }, false);
  t.same([w.full, w.upsert.map((p) => p.id), w.remove, Object.keys(w.components)], [false, ['p7'], [], []], 'a one-peer delta writes that peer only');

  w = await apply(
    {
      fromVersion: 3,
      toVersion: 4,
      network: 'n',
      upsertPeers: [],
      removePeers: [
        { id: 'p8', reason: REMOVAL_REASON.REMOVED },
        { id: 'p9', reason: REMOVAL_REASON.UNSCOPED },
      ],
    },
    false,
  );
  t.same([w.upsert.length, w.remove.sort()], [0, ['p8', 'p9']], 'a removal and an unscoping delete their rows only');

  w = await apply(
    {
      fromVersion: 4,
      toVersion: 5,
      network: 'n',
      upsertPeers: [],
      removePeers: [],
      dns: { nameservers: ['10.0.0.2'], searchDomains: [], records: [], domain: '', splits: [] },
    },
    false,
  );
  t.same([w.upsert.length, Object.keys(w.components)], [0, ['dns']], 'a component change writes that component');
});
