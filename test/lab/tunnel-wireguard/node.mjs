// One lab node of the tunnel lab, run inside its namespace: a host with the tunnel plugin and a
// delta applier, fed view changes on stdin (one JSON per line), answering on stdout (one JSON per
// line). It serves TCP on `serve` so peers can test reachability, and connects on request.
// usage: node node.mjs '{"name":"n1","ifname":"…","stateDir":"…","graceMs":…,"serve":7000}'
import { createConnection, createServer } from 'node:net';
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { Host } from '@meshp/core/host';
import { DeltaApplier } from '@meshp/core/delta';
import { TunnelWireguardPlugin } from '@meshp/tunnel-wireguard';

const conf = JSON.parse(process.argv[2]);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const log = { info: (f, msg) => out({ ...f, msg }), warn: (f, msg) => out({ ...f, msg }), error: (f, msg) => out({ ...f, msg }) };
const viewFile = join(conf.stateDir, 'view.json');

const plugin = new TunnelWireguardPlugin({
  interface: conf.ifname,
  stateDir: conf.stateDir,
  graceMs: conf.graceMs,
  privateRange: conf.privateRange,
  implementation: 'wireguard-go',
  ...(conf.directTrials ? { directTrials: conf.directTrials } : {}),
  log,
});
const host = new Host({ stateDir: conf.stateDir }).use(plugin);
const applier = new DeltaApplier();
try {
  applier.restore(JSON.parse(readFileSync(viewFile, 'utf8')));
} catch {
  // first start: an empty view
}
const publicKey = plugin.publicKey();
await plugin.attach(applier.view);

const servers = [];
for (const port of conf.serve) {
  // Greets, then echoes: a held connection shows whether an established flow still passes.
  const server = createServer((s) => {
    s.on('error', () => undefined);
    s.write(`hi from ${conf.name}\n`);
    s.on('data', (d) => s.write(d));
  });
  await new Promise((resolve) => server.listen(port, '0.0.0.0', resolve));
  servers.push(server);
}
out({ msg: 'ready', name: conf.name, publicKey, status: plugin.status() });

function connect(hostAddr, port, timeoutMs) {
  return new Promise((resolve) => {
    const s = createConnection({ host: hostAddr, port });
    let data = '';
    const done = (r) => {
      clearTimeout(timer);
      s.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => done({ ok: false, err: 'timeout' }), timeoutMs);
    s.on('data', (d) => {
      data += d;
      if (data.includes('\n')) done({ ok: data.startsWith('hi from'), data: data.trim() });
    });
    s.on('end', () => done({ ok: false, err: 'closed' }));
    s.on('error', (e) => done({ ok: false, err: e.code ?? e.message }));
  });
}

const held = new Map();
function hold(hostAddr, port, timeoutMs) {
  return new Promise((resolve) => {
    const s = createConnection({ host: hostAddr, port });
    s.on('error', () => undefined);
    const timer = setTimeout(() => resolve({ ok: false, err: 'timeout' }), timeoutMs);
    s.once('data', () => {
      clearTimeout(timer);
      held.set(`${hostAddr}:${port}`, s);
      resolve({ ok: true });
    });
  });
}
function probe(hostAddr, port, timeoutMs) {
  const s = held.get(`${hostAddr}:${port}`);
  if (!s) return { ok: false, err: 'not held' };
  return new Promise((resolve) => {
    const token = `p${Math.random()}\n`;
    let got = '';
    const onData = (d) => {
      got += d;
      if (got.includes(token)) finish({ ok: true });
    };
    const finish = (r) => {
      clearTimeout(timer);
      s.off('data', onData);
      resolve(r);
    };
    const timer = setTimeout(() => finish({ ok: false, err: 'timeout' }), timeoutMs);
    s.on('data', onData);
    s.write(token);
  });
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const m = JSON.parse(line);
  if (m.op === 'delta') {
    const t0 = performance.now();
    const r = applier.receive(m.delta);
    if (r.status === 'applied') {
      host.hooks.viewChanged.call(r.change);
      await plugin.settled();
      const tmp = viewFile + '.tmp';
      writeFileSync(tmp, JSON.stringify(applier.view.toSnapshot()));
      renameSync(tmp, viewFile);
    }
    out({ msg: 'applied', id: m.id, status: r.status, ms: performance.now() - t0, tunnel: plugin.status() });
  } else if (m.op === 'change') {
    // A view change handed to the tap as it is (what the applier does not produce today: a
    // REMOVED for a peer already out of this node's view, see the README).
    const t0 = performance.now();
    host.hooks.viewChanged.call(m.change);
    await plugin.settled();
    out({ msg: 'applied', id: m.id, status: 'applied', ms: performance.now() - t0, tunnel: plugin.status() });
  } else if (m.op === 'hold') {
    out({ msg: 'held', id: m.id, ...(await hold(m.host, m.port, m.timeoutMs ?? 1500)) });
  } else if (m.op === 'probe') {
    out({ msg: 'probed', id: m.id, ...(await probe(m.host, m.port, m.timeoutMs ?? 1500)) });
  } else if (m.op === 'connect') {
    out({ msg: 'connected', id: m.id, ...(await connect(m.host, m.port, m.timeoutMs ?? 1000)) });
  } else if (m.op === 'report') {
    // What the agent would report of the tunnel: the peers' paths and the relay allocation (issue 27).
    const r = await host.hooks.report.promise({
      node: conf.name,
      mode: 'adopted',
      at: new Date().toISOString(),
      firewall: null,
      resources: [],
      counts: {},
      facts: {},
    });
    out({ msg: 'report', id: m.id, handshakes: r.handshakes ?? null, relay: r.facts.relay ?? null });
  } else if (m.op === 'status') {
    out({ msg: 'status', id: m.id, tunnel: plugin.status() });
  } else if (m.op === 'stop') {
    await plugin.close({ down: m.down === true });
    for (const s of held.values()) s.destroy();
    for (const s of servers) s.close();
    out({ msg: 'stopped', id: m.id });
    process.exit(0);
  }
}
