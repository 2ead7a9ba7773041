import t from 'tap';
import { MeshpError, PLUGIN_API_VERSION, RETIRED_KEY, flip, type FirewallDriver, type Plugin } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

/** A found firewall and machine facts with no outside world: core's lifecycle tested without root. */
function machine(retireFails: boolean) {
  const calls: string[] = [];
  const driver: FirewallDriver = {
    kind: 'recording',
    async describe() { return { kind: 'recording', manager: 'test', active: true, tables: ['inet filter'], summary: [] }; },
    async openings() { return []; },
    async ensure() { calls.push('ensure'); return { added: [], removed: [] }; },
    async loadDerived() { calls.push('loadDerived'); },
    async unloadDerived() { calls.push('unloadDerived'); },
    async retire() {
      calls.push('retire');
      if (retireFails) throw new MeshpError('MESHP_FIREWALL_FAILED', 'cannot delete table inet filter');
      return { tables: ['inet filter'] };
    },
    async reenable() { calls.push('reenable'); },
  };
  const plugin: Plugin = {
    name: 'machine',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('machine', async (probe) => {
        probe.seen.push({ kind: 'recording', active: true, summary: 'test', by: 'machine', driver });
      });
      host.hooks.facts.tapPromise('machine', async () => ({ listening: async () => [], addresses: async () => [] }));
    },
  };
  return { plugin, calls };
}

const decl = declaration('adopted', [{ name: 'svc', taken: false, openings: [{ port: 8080, path: 'incoming' }] }]);

t.test('the flip loads the derived filter before it retires the found firewall', async (t) => {
  const b = bed(t);
  const m = machine(false);
  const host = b.host([m.plugin]);
  await flip(host, decl, undefined);
  t.same(m.calls.filter((c) => c !== 'ensure'), ['loadDerived', 'retire'], 'never less protected than before at any step');
  const store = new SqliteHostStore(b.stateDir);
  assertPrivate(t, b.stateDir); // issue 13: the state folder 0700, its database 0600
  t.ok(await store.getValue(RETIRED_KEY), 'the retired state is recorded for the return');
  await store.close();
});

t.test('a flip whose retire fails unloads the derived filter again and records nothing', async (t) => {
  const b = bed(t);
  const m = machine(true);
  const host = b.host([m.plugin]);
  await t.rejects(flip(host, decl, undefined), { code: 'MESHP_FIREWALL_FAILED' });
  t.same(m.calls.filter((c) => c !== 'ensure'), ['loadDerived', 'retire', 'unloadDerived']);
  const store = new SqliteHostStore(b.stateDir);
  t.equal(await store.getValue(RETIRED_KEY), null, 'still adopted');
  await store.close();
});

t.test('a flip against a stale preview id changes nothing', async (t) => {
  const b = bed(t);
  const m = machine(false);
  await t.rejects(flip(b.host([m.plugin]), decl, 'not-this-preview'), { code: 'MESHP_PREVIEW_STALE' });
  t.same(m.calls, []);
});
