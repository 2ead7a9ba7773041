// The mesh's resolver alone, run inside a namespace the test made: a host with the dns-resolver
// plugin and a delta applier, fed deltas on stdin (one JSON per line), answering on stdout (one JSON
// per line). usage: node dns-node.mjs '{"root":"…","listenAddress":"…","port":53,"stateDir":"…"}'
// (with "interface" and "commands", the machine's resolver manager is told of it; listenAddress
// left out, it answers on the view's mesh address).
import { createInterface } from 'node:readline';
import { Host } from '@meshp/core/host';
import { DeltaApplier } from '@meshp/core/delta';
import { Reconciler } from '@meshp/core/reconcile';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import { LocalFilesPlugin } from '@meshp/files-local';
import { SqliteStatePlugin } from '@meshp/state-sqlite';
import { StateDelta } from '@meshp/protocol';

const conf = JSON.parse(process.argv[2]);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const plugin = new DnsResolverPlugin({
  root: conf.root,
  port: conf.port,
  forwardTimeoutMs: 1000,
  ...(conf.listenAddress ? { listenAddress: conf.listenAddress } : {}),
  ...(conf.interface ? { interface: conf.interface } : {}),
  ...(conf.commands ? { commands: conf.commands } : {}),
});
const host = new Host({ stateDir: conf.stateDir, root: conf.root }).use(plugin);
// With "stores": the host's files and state, so a reconcile (op "reconcile", a mode) plans and applies what the plugin adds.
if (conf.stores) host.use(new LocalFilesPlugin()).use(new SqliteStatePlugin());
const applier = new DeltaApplier();
let attached = false;

const rl = createInterface({ input: process.stdin });
out({ msg: 'ready' });
for await (const line of rl) {
  const m = JSON.parse(line);
  if (m.op === 'delta') {
    // As the wire carries it: the JSON of the generated message, read back by the generated code.
    const r = applier.receive(StateDelta.fromJSON(m.delta));
    if (r.status === 'applied') {
      if (!attached) {
        attached = true;
        await plugin.attach(applier.view);
      } else host.hooks.viewChanged.call(r.change);
      await plugin.settled();
    }
    out({ msg: 'applied', id: m.id, status: r.status, dns: plugin.status() });
  } else if (m.op === 'status') {
    out({ msg: 'status', id: m.id, dns: plugin.status() });
  } else if (m.op === 'reconcile') {
    const decl = { apiVersion: 'meshp/v1', node: 'a', mode: m.mode, settings: { ports: {} }, modules: [] };
    const r = await new Reconciler(host).reconcile(decl, { preview: Boolean(m.preview) });
    const actions = r.plan.actions.filter((a) => a.kind === 'file').map((a) => ({ key: a.key, op: a.op, state: a.state, reason: a.reason }));
    out({ msg: 'reconciled', id: m.id, actions, failures: r.failures, dns: plugin.status() });
  } else if (m.op === 'leave') {
    const leaving = { preview: Boolean(m.preview), removed: [], kept: [] };
    await host.hooks.leave.promise(leaving);
    out({ msg: 'left', id: m.id, removed: leaving.removed, dns: plugin.status() });
  } else if (m.op === 'stop') {
    await plugin.close();
    out({ msg: 'stopped', id: m.id });
    process.exit(0);
  }
}
