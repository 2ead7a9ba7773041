// One node of bench/route-failover.bench.mjs, run inside its network namespace: the tunnel plugin on
// wireguard-go fed the controller's deltas over IPC (applied by the agent's own DeltaApplier, acked
// back), and a TCP prober that answers when a connection to HOST:PORT is made.
import { connect } from 'node:net';
import { Host } from '@meshp/core/host';
import { DeltaApplier } from '@meshp/core/delta';
import { TunnelWireguardPlugin } from '@meshp/tunnel-wireguard';

const [ifname, stateDir] = process.argv.slice(2);
const plugin = new TunnelWireguardPlugin({ interface: ifname, stateDir, implementation: 'wireguard-go', graceMs: 60_000 });
const host = new Host({ stateDir }).use(plugin);
const applier = new DeltaApplier();
let attached = false;

/** One TCP connection, true when it is made within `ms`. */
const tryConnect = (h, port, ms) =>
  new Promise((resolve) => {
    const s = connect({ host: h, port });
    const done = (ok) => (s.destroy(), clearTimeout(timer), resolve(ok));
    const timer = setTimeout(() => done(false), ms);
    s.once('connect', () => done(true));
    s.once('error', () => setTimeout(() => done(false), 20));
  });

process.on('message', async (m) => {
  try {
    if (m.delta) {
      const r = applier.receive(m.delta);
      if (r.status !== 'applied') throw new Error(`delta not applied: ${JSON.stringify(r).slice(0, 300)}`);
      if (!attached) {
        attached = true;
        await plugin.attach(applier.view);
      } else {
        host.hooks.viewChanged.call(r.change);
        await plugin.settled();
      }
      const st = plugin.status();
      if (st.lastError) throw new Error(st.lastError);
      process.send({ id: m.id, ack: r.ack, pid: st.pid });
    } else if (m.probe) {
      // Until a connection is made (a new one every 100 ms at most: the resolution of the figure), then the time it was made.
      while (!(await tryConnect(m.probe.host, m.probe.port, 100)));
      process.send({ id: m.id, at: performance.timeOrigin + performance.now() });
    } else if (m.key) {
      process.send({ id: m.id, key: plugin.publicKey() });
    }
  } catch (e) {
    process.send({ id: m.id, error: String(e?.stack ?? e) });
  }
});
process.send({ ready: true });
