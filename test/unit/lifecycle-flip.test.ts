import t from 'tap';
import sinon from 'sinon';
import { MeshpError, PLUGIN_API_VERSION, resourceKey, toOpening, type DerivedFilter, type FirewallDriver, type Listener, type Plugin } from '@meshp/core';
import { RETIRED_KEY } from '@meshp/core/reconcile';
import { MODE_KEY, flip, previewConverge } from '@meshp/core/lifecycle';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

/** A found firewall and machine facts with no outside world: core's lifecycle tested without root. */
function machine(retireFails: boolean, listening: Listener[] = []) {
  const calls: string[] = [];
  const derived: DerivedFilter[] = [];
  const driver: FirewallDriver = {
    kind: 'recording',
    async describe() {
      return { kind: 'recording', manager: 'test', active: true, tables: ['inet filter'], summary: [] };
    },
    async openings() {
      return [];
    },
    async ensure() {
      calls.push('ensure');
      return { added: [], removed: [] };
    },
    async loadDerived(f) {
      calls.push('loadDerived');
      derived.push(f);
    },
    async unloadDerived() {
      calls.push('unloadDerived');
    },
    async retire() {
      calls.push('retire');
      if (retireFails) throw new MeshpError('MESHP_FIREWALL_FAILED', 'cannot delete table inet filter');
      return { tables: ['inet filter'] };
    },
    async reenable() {
      calls.push('reenable');
    },
  };
  const plugin: Plugin = {
    name: 'machine',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('machine', async (probe) => {
        probe.seen.push({ kind: 'recording', active: true, summary: 'test', by: 'machine', driver });
      });
      host.hooks.facts.tapPromise('machine', async () => ({ listening: async () => listening, addresses: async () => [] }));
    },
  };
  return { plugin, calls, derived };
}

const decl = declaration('adopted', [{ name: 'svc', taken: false, openings: [{ port: 8080, path: 'incoming' }] }]);

t.test('the flip loads the derived filter before it retires the found firewall', async (t) => {
  const b = bed(t);
  const m = machine(false);
  const host = b.host([m.plugin]);
  await flip(host, decl, undefined);
  t.same(
    m.calls.filter((c) => c !== 'ensure'),
    ['loadDerived', 'retire'],
    'never less protected than before at any step',
  );
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
  t.same(
    m.calls.filter((c) => c !== 'ensure'),
    ['loadDerived', 'retire', 'unloadDerived'],
  );
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

t.test("a plugin's own opening (the tunnel's port, added through the plan hook) is previewed open and goes into the derived filter at the flip", async (t) => {
  const b = bed(t);
  const m = machine(false, [{ protocol: 'udp', address: '0.0.0.0', port: 51820, family: 4, process: 'wireguard-go' }]);
  const port: Plugin = {
    name: 'tunnel-like',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.plan.tap('tunnel-like', (plan) => {
        const o = toOpening('tunnel', { port: 51820, protocol: 'udp', path: 'incoming', from: [] });
        if (!plan.firewall.kind) return plan;
        return {
          ...plan,
          actions: [
            ...plan.actions,
            { key: resourceKey('opening', o.id), kind: 'opening', module: 'tunnel', op: 'create', state: 'created', spec: o, by: 'tunnel-like' },
          ],
          firewall: { ...plan.firewall, openings: [...plan.firewall.openings, o] },
        };
      });
    },
  };
  const host = b.host([m.plugin, port]);
  const preview = await previewConverge(host, decl);
  t.match(
    preview.items.find((i) => i.port === 51820),
    { after: 'open', declaredBy: 'tunnel' },
    'not previewed as closing',
  );
  await flip(host, decl, preview.id);
  t.same(m.derived[0]!.openings.map((o) => `${o.protocol}/${o.port}`).sort(), ['tcp/8080', 'udp/51820'], 'the derived filter holds it from the flip on');
});

t.test('a flip whose retirement cannot be recorded (a full disk) re-enables the found firewall, unloads the derived filter and stays adopted', async (t) => {
  const b = bed(t);
  const m = machine(false);
  const host = b.host([m.plugin]);
  const store = await host.state();
  const set = store.setValue.bind(store);
  // Fault injection: the store refuses the retirement's record, as a full disk does.
  const stub = sinon.stub(store, 'setValue').callsFake(async (name: string, value: unknown) => {
    if (name === RETIRED_KEY) throw new MeshpError('MESHP_STORE_FULL', '/state/host.db: the disk is full; nothing in the store changed');
    return set(name, value);
  });
  t.teardown(() => stub.restore());
  await t.rejects(flip(host, decl, undefined), { code: 'MESHP_STORE_FULL' });
  t.same(
    m.calls.filter((c) => c !== 'ensure'),
    ['loadDerived', 'retire', 'reenable', 'unloadDerived'],
    'what was retired is put back from the state in hand, then the derived filter goes',
  );
  stub.restore();
  t.equal(await store.getValue(MODE_KEY), null, 'not recorded converged');
});
