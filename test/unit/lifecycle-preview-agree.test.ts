/**
 * The converge preview is one function on both sides (issue 33, item 1): the agent computes it on the
 * machine, the controller from the agent's report, and a member whose plugins add an opening (the
 * tunnel's UDP port) gets the same id from both, so a flip to the id the operator saw is not refused
 * stale. Also: a door with live connections (an ssh session) is marked and never closed unasked, and a
 * node no firewall plugin can hold a derived filter on is not converged.
 */
import t from 'tap';
import { PLUGIN_API_VERSION, type FirewallDriver, type Listener, type Plugin, type ReportMessage } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { reconcileLifecycle } from '@meshp/core/agent';
import { declarationFromWire } from '@meshp/core/delta';
import { pluginOpeningsOfNode, previewConverge } from '@meshp/core/lifecycle';
import { Controller, MemoryStore, convergeNode, previewOf } from '@meshp/controller';
import { withTunnelOpening } from '@meshp/tunnel-wireguard';
import type { Subtest } from '../helpers/tap-types.js';
import { bed } from '../helpers/host.js';

const NET = 'n';
const TUNNEL = 51820;

function controller() {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.defineModule(NET, { name: 'web', openings: [{ port: 8080, path: 'incoming' }] });
  c.join(NET, { id: 'm2', nodeKey: 'k2', mode: 'adopted' });
  c.assignModule(NET, 'm2', 'web');
  return c;
}

/** A member: an active found firewall, the machine's sockets, and the tunnel plugin's own opening on every plan. */
function member(t: Subtest, listening: Listener[], firewall = true) {
  const state = { active: true, derived: false };
  const driver: FirewallDriver = {
    kind: 'fake',
    describe: async () => ({ kind: 'fake', manager: 'test', active: state.active, tables: ['inet filter'], summary: [] }),
    openings: async () => [],
    ensure: async () => ({ added: [], removed: [] }),
    loadDerived: async () => void (state.derived = true),
    unloadDerived: async () => void (state.derived = false),
    retire: async () => ((state.active = false), {}),
    reenable: async () => void (state.active = true),
  };
  const plugins: Plugin[] = [
    {
      name: 'facts-fake',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) => h.hooks.facts.tapPromise('facts-fake', async () => ({ listening: async () => listening, addresses: async () => [] })),
    },
    // The real tunnel plugin's plan tap: its UDP port on every plan of a node with a firewall.
    {
      name: 'tunnel-opening',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) => h.hooks.plan.tapPromise('tunnel-opening', async (plan, ctx) => withTunnelOpening(plan, ctx.declaration.settings, TUNNEL)),
    },
    ...(firewall
      ? [
          {
            name: 'firewall-fake',
            apiVersion: PLUGIN_API_VERSION,
            apply: (h: Parameters<Plugin['apply']>[0]) =>
              h.hooks.firewall.tapPromise(
                'firewall-fake',
                async (probe) => void probe.seen.push({ kind: 'fake', active: state.active, summary: 'fake', by: 'firewall-fake', driver }),
              ),
          },
        ]
      : []),
  ];
  return { state, host: (): Host => bed(t, firewall ? 'auto' : 'none').host(plugins) };
}

const SOCKETS: Listener[] = [
  { protocol: 'tcp', address: '0.0.0.0', port: 8080, family: 4, process: 'busybox', pid: 10 },
  { protocol: 'udp', address: '0.0.0.0', port: TUNNEL, family: 4, process: 'wireguard-go', pid: 11 },
];

/** The report the agent sends: what `Agent` puts in it, from the same host. */
async function reportOf(
  host: Host,
  wire: ReturnType<Controller['declarationOf']>,
  listening: Listener[],
  extra: Partial<ReportMessage> = {},
): Promise<ReportMessage> {
  const d = await (await host.firewall())!.describe();
  return {
    appliedVersion: 1,
    mode: 'adopted',
    firewallKind: d.kind,
    firewallActive: d.active,
    firewallTables: d.tables,
    resources: [],
    at: '2026-01-01T00:00:00Z',
    listening: listening.map((l) => ({
      protocol: l.protocol,
      address: l.address,
      port: l.port,
      process: l.process ?? '',
      ...(l.pid ? { pid: l.pid } : {}),
      ...(l.established ? { established: l.established } : {}),
    })),
    published: [],
    pluginOpenings: await pluginOpeningsOfNode(host, declarationFromWire(wire)),
    ...extra,
  };
}

t.test("a member whose tunnel plugin opens its port: the controller's preview id is the agent's, and the flip to it goes through", async (t) => {
  const c = controller();
  const m = member(t, SOCKETS);
  const host = m.host();
  const wire = c.declarationOf(NET, 'm2');
  const onAgent = await previewConverge(host, declarationFromWire(wire));
  const report = await reportOf(host, wire, SOCKETS);
  t.match(
    report.pluginOpenings,
    [{ module: 'tunnel', port: TUNNEL, protocol: 'udp', path: 'incoming' }],
    'the agent reports the opening its tunnel plugin adds',
  );
  const onController = previewOf(c, NET, 'm2', report);
  t.equal(onController.id, onAgent.id, 'one id, whoever computes it');
  t.match(
    onController.items.find((i) => i.port === TUNNEL),
    { declaredBy: 'tunnel', after: 'open' },
    "the tunnel's port stays open, not WILL CLOSE",
  );

  // What the controller computed before: the declaration's openings alone.
  const { pluginOpenings: _gone, ...older } = report;
  const blind = previewOf(c, NET, 'm2', older);
  t.not(blind.id, onAgent.id, 'without the plugin openings the ids differ (the stale refusal this fixes)');
  t.match(
    blind.items.find((i) => i.port === TUNNEL),
    { after: 'closes' },
  );

  const { preview } = convergeNode(c, NET, 'm2', report, onController.id);
  const flipped = await reconcileLifecycle(host, { ...c.declarationOf(NET, 'm2'), convergePreviewId: preview.id });
  t.match(flipped.lifecycle, { state: 'converged', previewId: onAgent.id }, 'the agent flips to the id the operator saw');
  t.ok(m.state.derived && !m.state.active, 'derived filter loaded, found firewall retired');
});

t.test('the order plugins list their openings in does not change the id', async (t) => {
  const c = controller();
  const host = member(t, SOCKETS).host();
  const wire = c.declarationOf(NET, 'm2');
  const report = await reportOf(host, wire, SOCKETS);
  const extra = {
    id: 'other/incoming/tcp/9',
    module: 'other',
    port: 9,
    protocol: 'tcp' as const,
    from: [],
    path: 'incoming' as const,
    action: 'accept' as const,
  };
  const a = previewOf(c, NET, 'm2', { ...report, pluginOpenings: [...report.pluginOpenings!, extra] });
  const b = previewOf(c, NET, 'm2', { ...report, pluginOpenings: [extra, ...report.pluginOpenings!] });
  t.equal(a.id, b.id);
});

t.test('a door with live connections that the flip closes is marked, and the flip is refused unless allowed', async (t) => {
  const c = controller();
  const sshd = (established: number): Listener => ({ protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4, process: 'sshd', pid: 20, established });
  const host = member(t, [...SOCKETS, sshd(1)]).host();
  const wire = c.declarationOf(NET, 'm2');
  const report = await reportOf(host, wire, [...SOCKETS, sshd(1)]);
  const p = previewOf(c, NET, 'm2', report);
  t.match(
    p.items.find((i) => i.port === 22),
    { after: 'closes', liveConnections: 1 },
  );
  t.match(p.steps.join('\n'), /22\/tcp \(sshd \(pid 20\)\) closes with 1 live connection, perhaps your own ssh session/);
  const version = c.stateVersion(NET);
  t.throws(() => convergeNode(c, NET, 'm2', report, p.id), { code: 'MESHP_LIVE_SESSION', message: /--allow-close 22\/tcp/ });
  t.equal(c.stateVersion(NET), version, 'refused: nothing recorded');
  const two = previewOf(c, NET, 'm2', await reportOf(host, wire, [...SOCKETS, sshd(2)]));
  t.equal(two.id, p.id, 'a session more or less is not a changed machine');
  t.doesNotThrow(() => convergeNode(c, NET, 'm2', report, p.id, ['22/tcp']), 'named: allowed');

  // Declared by a module (the catalogue's ssh module), the port stays open and nothing is refused.
  const d = controller();
  d.defineModule(NET, { name: 'ssh', openings: [{ port: 22, path: 'incoming' }] });
  d.assignModule(NET, 'm2', 'ssh');
  const kept = previewOf(d, NET, 'm2', report);
  t.match(
    kept.items.find((i) => i.port === 22),
    { after: 'open', declaredBy: 'ssh', liveConnections: 1 },
  );
  t.doesNotThrow(() => convergeNode(d, NET, 'm2', report, kept.id));
});

t.test('a node no firewall plugin can hold a derived filter on is not converged, and says why', async (t) => {
  const c = controller();
  const report: ReportMessage = {
    appliedVersion: 1,
    mode: 'adopted',
    firewallKind: 'none',
    firewallActive: false,
    resources: [],
    at: '',
    listening: [],
    published: [],
  };
  t.match(previewOf(c, NET, 'm2', report).steps, [/^REFUSED: node m2 has no firewall plugin/]);
  t.throws(() => convergeNode(c, NET, 'm2', report), { code: 'MESHP_PROVIDER_MISSING' });
  t.equal(c.member(NET, 'm2')!.mode, 'adopted', 'nothing recorded');

  // The agent of a node enrolled converged, with no firewall plugin: refused, reconciled as adopted.
  const host = member(t, SOCKETS, false).host();
  const wire = { ...c.declarationOf(NET, 'm2'), mode: 2 };
  const first = await reconcileLifecycle(host, wire);
  t.match(first.lifecycle, { state: 'refused', code: 'MESHP_PROVIDER_MISSING' });
  t.equal(first.result.report.mode, 'adopted', 'the machine is reconciled as adopted');
  const again = await reconcileLifecycle(host, wire);
  t.equal(again.lifecycle.at, first.lifecycle.at, 'the refusal is said once, not at every reconcile');
});
