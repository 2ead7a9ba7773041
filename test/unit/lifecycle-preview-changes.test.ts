/**
 * Issue 25: the converge preview lists what plugins change beyond the doors — a converged node's
 * `/etc/resolv.conf` the mesh will write (the dns-resolver plugin's real file action, on a real root
 * with the real files and state plugins) — on the machine (`host converge --preview`) and at the
 * controller from the agent's report, through the wire's codec (`meshp node converge --preview`),
 * with one id; the id is the same for an unchanged machine, the same as before for a machine with no
 * such change, and another when what the flip would write changes.
 */
import t from 'tap';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PLUGIN_API_VERSION, type FirewallDriver, type Listener, type Plugin, type ReportMessage } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { declarationFromWire } from '@meshp/core/delta';
import { buildPreview, flip, pluginPlanOfNode, previewConverge } from '@meshp/core/lifecycle';
import { Controller, MemoryStore, convergeNode, previewOf } from '@meshp/controller';
import { resolvConfAction } from '@meshp/dns-resolver';
import { agentFromWire, agentToWire } from '../../plugins/transport-grpc/src/codec.js';
import type { Subtest } from '../helpers/tap-types.js';
import { bed } from '../helpers/host.js';

const NET = 'n';
const MESH = '100.96.0.9';
const SOCKETS: Listener[] = [{ protocol: 'tcp', address: '0.0.0.0', port: 8080, family: 4, process: 'busybox', pid: 10 }];

function controller() {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.defineModule(NET, { name: 'web', openings: [{ port: 8080, path: 'incoming' }] });
  c.join(NET, { id: 'm2', nodeKey: 'k2', mode: 'adopted' });
  c.assignModule(NET, 'm2', 'web');
  return c;
}

/** A member with a found firewall and the dns-resolver plugin's file action on its plans (its resolver answering on MESH:53). */
function member(t: Subtest, resolver: { on: boolean }) {
  const b = bed(t);
  const state = { active: true };
  const driver: FirewallDriver = {
    kind: 'fake',
    describe: async () => ({ kind: 'fake', manager: 'test', active: state.active, tables: ['inet filter'], summary: [] }),
    openings: async () => [],
    ensure: async () => ({ added: [], removed: [] }),
    loadDerived: async () => {},
    unloadDerived: async () => {},
    retire: async () => ((state.active = false), {}),
    reenable: async () => void (state.active = true),
  };
  const plugins: Plugin[] = [
    {
      name: 'facts-fake',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) => h.hooks.facts.tapPromise('facts-fake', async () => ({ listening: async () => SOCKETS, addresses: async () => [] })),
    },
    {
      name: 'firewall-fake',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) =>
        h.hooks.firewall.tapPromise(
          'firewall-fake',
          async (probe) => void probe.seen.push({ kind: 'fake', active: state.active, summary: 'fake', by: 'firewall-fake', driver }),
        ),
    },
    // The dns-resolver plugin's own file action (plugins/dns-resolver/src/managed-file.ts), as its plan tap adds it.
    {
      name: 'dns-resolver',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) =>
        h.hooks.plan.tapPromise('dns-resolver', async (plan) => {
          const files = (await h.files())!;
          const a = await resolvConfAction(
            plan,
            files,
            await h.state(),
            true,
            resolver.on ? { address: MESH, domain: 'n.mesh', searchDomains: [] } : null,
            () => {},
          );
          return a ? { ...plan, actions: [...plan.actions, a] } : plan;
        }),
    },
  ];
  return { host: (): Host => b.host(plugins), root: b.root };
}

async function reportOf(host: Host, wire: ReturnType<Controller['declarationOf']>): Promise<ReportMessage> {
  const d = await (await host.firewall())!.describe();
  const planned = await pluginPlanOfNode(host, declarationFromWire(wire));
  const report: ReportMessage = {
    appliedVersion: 1,
    mode: 'adopted',
    firewallKind: d.kind,
    firewallActive: d.active,
    firewallTables: d.tables,
    resources: [],
    at: '2026-01-01T00:00:00Z',
    listening: SOCKETS.map((l) => ({ protocol: l.protocol, address: l.address, port: l.port, process: l.process ?? '', pid: l.pid! })),
    published: [],
    pluginOpenings: planned.openings,
    ...(planned.changes.length ? { pluginChanges: planned.changes } : {}),
  };
  // As the controller reads it: through the wire's codec.
  const back = agentFromWire(agentToWire({ report }));
  if (!('report' in back)) throw new Error('not a report');
  return back.report;
}

t.test('the resolv.conf the flip writes is in both previews, one id; it moves when what would be written moves', async (t) => {
  const resolver = { on: true };
  const { host, root } = member(t, resolver);
  const h = host();
  mkdirSync(join(root, 'etc'), { recursive: true });
  const original = '# found\nnameserver 192.0.2.53\n';
  writeFileSync(join(root, 'etc/resolv.conf'), original);
  const c = controller();
  const wire = c.declarationOf(NET, 'm2');

  const onAgent = await previewConverge(h, declarationFromWire(wire));
  t.match(onAgent.changes, [{ key: 'file:/etc/resolv.conf', kind: 'file', op: 'converge', by: 'dns-resolver', module: 'dns' }], 'the agent lists the change');
  t.equal(onAgent.changes.length, 1);
  t.ok(
    onAgent.steps.includes("write file /etc/resolv.conf (dns-resolver): found; its original recorded, then the mesh's resolver named first"),
    'a step of the flip says it',
  );
  t.equal(readFileSync(join(root, 'etc/resolv.conf'), 'utf8'), original, 'a preview writes nothing');
  t.equal((await previewConverge(h, declarationFromWire(wire))).id, onAgent.id, 'the machine unchanged: the same id');

  const report = await reportOf(h, wire);
  const onController = previewOf(c, NET, 'm2', report);
  t.equal(onController.id, onAgent.id, "the controller's preview, from the report over the wire: the same id");
  t.same(onController.changes, onAgent.changes, 'and the same change listed');
  t.same(onController.steps, onAgent.steps, 'and the same steps');

  // An older agent reports no changes: its preview's id is another, so a flip to it is refused stale, never made blind.
  const { pluginChanges: _gone, ...older } = report;
  t.not(previewOf(c, NET, 'm2', older).id, onAgent.id);

  // Without the change, the id is what it was before changes were listed (an unchanged machine keeps its id across versions).
  const decl = declarationFromWire(wire);
  const facts = { listening: SOCKETS, published: [], firewall: await (await h.firewall())!.describe(), pluginOpenings: report.pluginOpenings ?? [] };
  const none = buildPreview({ declaration: decl, ...facts, pluginChanges: [] });
  t.equal(none.id, buildPreview({ declaration: decl, ...facts }).id, 'no change: the id of a preview that knows no changes');
  t.not(none.id, onAgent.id, 'the change is in the id');
  resolver.on = false;
  t.equal((await previewConverge(h, decl)).id, none.id, 'a resolver not answering on 53: nothing to write, the id without it');
  resolver.on = true;
  const reworded = buildPreview({ declaration: decl, ...facts, pluginChanges: report.pluginChanges!.map((x) => ({ ...x, reason: 'other words' })) });
  t.equal(reworded.id, onAgent.id, 'a reason reworded is the same change');

  // What the flip would write changes (the machine's own nameserver is another): another id, and the flip to the old one is refused.
  writeFileSync(join(root, 'etc/resolv.conf'), '# found\nnameserver 192.0.2.54\n');
  const moved = await previewConverge(h, decl);
  t.not(moved.id, onAgent.id, 'another file to write: another id');
  t.not(previewOf(c, NET, 'm2', await reportOf(h, wire)).id, onAgent.id, "and at the controller, from the agent's next report");
  t.throws(() => convergeNode(c, NET, 'm2', report, moved.id), { code: 'MESHP_PREVIEW_STALE' }, 'the controller refuses an id its report does not give');
  await t.rejects(flip(h, decl, onAgent.id), { code: 'MESHP_PREVIEW_STALE' }, 'the agent refuses the old id');
  t.equal(readFileSync(join(root, 'etc/resolv.conf'), 'utf8'), '# found\nnameserver 192.0.2.54\n', 'refused: nothing written');

  const done = await flip(h, decl, moved.id);
  t.equal(done.preview.id, moved.id);
  t.match(
    readFileSync(join(root, 'etc/resolv.conf'), 'utf8'),
    new RegExp(`^nameserver ${MESH.replace(/\./g, '\\.')}\nnameserver 192\\.0\\.2\\.54\n`, 'm'),
    'the flip wrote what the preview said',
  );
});
