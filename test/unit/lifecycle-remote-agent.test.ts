/**
 * The agent's side of the lifecycle, on a real host (files, state) with a firewall driver and the
 * machine's facts played by plugins: a converged declaration flips only to its preview, or, without
 * one, only a machine with nothing to close; an adopted one on a retired machine returns.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { PLUGIN_API_VERSION, type Declaration, type FirewallDriver, type LifecycleReport, type Listener, type Plugin, type WireDeclaration } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { reconcileLifecycle } from '@meshp/core/agent';
import { declarationToWire } from '@meshp/core/delta';
import { RETIRED_KEY } from '@meshp/core/reconcile';
import { previewConverge } from '@meshp/core/lifecycle';
import { bed } from '../helpers/host.js';

interface Machine {
  active: boolean;
  derived: boolean;
  calls: string[];
  listening: Listener[];
}

function machine(t: Subtest, m: Partial<Machine> = {}) {
  const state: Machine = { active: true, derived: false, calls: [], listening: [], ...m };
  const driver: FirewallDriver = {
    kind: 'fake',
    describe: async () => ({
      kind: 'fake',
      manager: 'test',
      active: state.active,
      tables: state.active ? ['inet filter'] : [],
      configFile: '/etc/fake.conf',
      summary: [],
    }),
    openings: async () => [],
    ensure: async (o: unknown[], r: unknown[]) => (o.length + r.length === 0 && state.calls.push('ensure nothing'), { added: [], removed: [] }),
    loadDerived: async () => void (state.calls.push('loadDerived'), (state.derived = true)),
    unloadDerived: async () => void (state.calls.push('unloadDerived'), (state.derived = false)),
    retire: async () => (state.calls.push('retire'), (state.active = false), {}),
    reenable: async () => void (state.calls.push('reenable'), (state.active = true)),
  };
  const plugins: Plugin[] = [
    {
      name: 'firewall-fake',
      apiVersion: PLUGIN_API_VERSION,
      apply: (host) =>
        host.hooks.firewall.tapPromise(
          'firewall-fake',
          async (probe) => void probe.seen.push({ kind: 'fake', active: state.active, summary: 'fake', by: 'firewall-fake', driver }),
        ),
    },
    {
      name: 'facts-fake',
      apiVersion: PLUGIN_API_VERSION,
      apply: (host) => host.hooks.facts.tapPromise('facts-fake', async () => ({ listening: async () => state.listening, addresses: async () => [] })),
    },
  ];
  const b = bed(t);
  return { state, host: (): Host => b.host(plugins) };
}

const WEB = { name: 'web', taken: false, openings: [{ port: 8080, path: 'incoming' as const, from: ['10.70.1.0/24'] }] };
const decl = (mode: Declaration['mode']): Declaration => ({ apiVersion: 'meshp/v1', node: 'n1', mode, settings: { ports: {} }, modules: [WEB] });
const wire = (mode: Declaration['mode'], convergePreviewId = ''): WireDeclaration => ({ ...declarationToWire(decl(mode)), convergePreviewId });
const busy: Listener[] = [
  { protocol: 'tcp', address: '0.0.0.0', port: 8080, family: 4, process: 'web', pid: 5 },
  { protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4, process: 'other', pid: 6 },
];

t.test('a converged declaration without a preview id never flips a machine with an active found firewall', async (t) => {
  const m = machine(t, { listening: [] });
  const host = m.host();
  const out = await reconcileLifecycle(host, wire('converged'));
  t.match(out.lifecycle, { state: 'refused', code: 'MESHP_MACHINE_IN_USE', message: /active fake firewall/ });
  t.same(m.state.calls, [], 'no derived filter, nothing retired');
  t.equal(out.result.report.mode, 'adopted', 'the machine is reconciled as adopted meanwhile');
  t.notOk(await (await host.state()).getValue(RETIRED_KEY));
});

t.test('nor one whose reachable ports would close; it says which', async (t) => {
  const m = machine(t, { active: false, listening: busy });
  const out = await reconcileLifecycle(m.host(), wire('converged'));
  t.match(out.lifecycle, { state: 'refused', code: 'MESHP_MACHINE_IN_USE', message: /9000\/tcp \(other \(pid 6\)\) would close/ });
  t.notMatch(out.lifecycle.message, /8080/, 'a declared port does not count');
  t.same(m.state.calls, []);
});

t.test('a machine with nothing to close flips without a preview id', async (t) => {
  const m = machine(t, { active: false, listening: [{ protocol: 'tcp', address: '127.0.0.1', port: 7000, family: 4, process: 'local' }] });
  const host = m.host();
  const out = await reconcileLifecycle(host, wire('converged'));
  t.match(out.lifecycle, { state: 'converged' });
  t.ok(m.state.calls.includes('loadDerived'), 'the derived filter is loaded');
  t.notOk(m.state.calls.includes('retire'), 'no active firewall to retire');
  t.ok(await (await host.state()).getValue(RETIRED_KEY));
});

t.test('a stale preview id is refused on the machine, nothing changes, and it is not retried', async (t) => {
  const m = machine(t, { listening: busy });
  const host = m.host();
  const out = await reconcileLifecycle(host, wire('converged', 'deadbeefdeadbeef'));
  t.match(out.lifecycle, { state: 'refused', code: 'MESHP_PREVIEW_STALE', previewId: 'deadbeefdeadbeef' });
  t.same(m.state.calls, []);
  t.ok(m.state.active, 'the found firewall is in force');
  const again = await reconcileLifecycle(host, wire('converged', 'deadbeefdeadbeef'));
  t.same(again.lifecycle, out.lifecycle, 'the same refusal, kept');
  t.equal(again.result.report.mode, 'adopted');
});

t.test('the recorded preview flips step by step; adopted again, the found firewall comes back', async (t) => {
  const m = machine(t, { listening: busy });
  const host = m.host();
  const { id } = await previewConverge(host, decl('adopted'));
  const steps: LifecycleReport[] = [];
  const out = await reconcileLifecycle(host, wire('converged', id), (l) => steps.push(structuredClone(l)));
  t.match(out.lifecycle, { state: 'converged', previewId: id });
  t.same(
    m.state.calls,
    ['loadDerived', 'retire', 'ensure nothing'],
    'derived filter first, then the found firewall retired, then what the mesh wrote while adopted removed',
  );
  t.same(
    steps.map((s) => s.state),
    ['flipping', ...out.lifecycle.steps.map(() => 'flipping'), 'converged'],
  );
  t.match(out.lifecycle.steps, [
    /^taking web/,
    /^loading the derived filter/,
    /^retiring the found fake firewall/,
    /^removed the adopted node's marked rules/,
    'converged',
  ]);
  t.notOk(m.state.active);

  const later = await reconcileLifecycle(host, wire('converged', id));
  t.equal(later.lifecycle.state, 'converged', 'converged stays converged');
  t.same(
    m.state.calls.filter((c) => c === 'retire'),
    ['retire'],
    'and is not flipped twice',
  );

  m.state.calls.length = 0;
  const back = await reconcileLifecycle(host, wire('adopted'));
  t.match(back.lifecycle, { state: 'adopted' });
  t.same(m.state.calls, ['reenable', 'unloadDerived'], 'the found firewall first, then the derived filter goes');
  t.ok(m.state.active);
  t.notOk(await (await host.state()).getValue(RETIRED_KEY));
});
