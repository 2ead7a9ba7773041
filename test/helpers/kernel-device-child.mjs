// Run inside a test's network namespace (test/integration/tunnel-kernel-device.test.ts): drives the
// tunnel plugin's KernelDevice — the `wg set` / `wg show dump` path meant for kernel WireGuard —
// against a real WireGuard interface. `wg` speaks netlink to the kernel's, and the UAPI socket to
// wireguard-go's (/var/run/wireguard/IF.sock): on a machine without the module, the interface under
// it is wireguard-go's, and everything but the link's creation and deletion is the kernel path's own.
// usage: node kernel-device-child.mjs '{"ifname":"…","stateDir":"…","peers":[…]}'  → one JSON line per step
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { KernelDevice, UserspaceDevice, openDevice } from '@meshp/tunnel-wireguard';
import { ensureTunnelKey } from '@meshp/tunnel-wireguard';

const conf = JSON.parse(process.argv[2]);
const out = (step, o) => process.stdout.write(JSON.stringify({ step, ...o }) + '\n');
const codeOf = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });

const key = ensureTunnelKey(conf.stateDir, conf.ifname);
const moduleLoaded = existsSync('/sys/module/wireguard');

// 1. What `auto` picks on this kernel, on a name nothing runs yet.
const picked = await openDevice({ ifname: `${conf.ifname}a`, stateDir: conf.stateDir, keyFile: key.file, implementation: 'auto' });
out('auto', { moduleLoaded, implementation: picked.implementation });
if (picked.implementation === 'kernel') await picked.down();

// 2. The kernel device's own creation: with no module, refused with a code, naming the command.
const bare = new KernelDevice(`${conf.ifname}k`, key.file);
try {
  await bare.up();
  out('kernel-up', { ok: true });
  await bare.down();
} catch (e) {
  out('kernel-up', { ok: false, ...codeOf(e) });
}

// 3. The kernel device's set/get through `wg`, on a real interface (wireguard-go's where no module).
const user = new UserspaceDevice(conf.ifname, conf.stateDir);
await user.up();
try {
  const dev = new KernelDevice(conf.ifname, key.file);
  const [p1, p2] = conf.peers;
  await dev.set({ privateKey: key.privateKey, listenPort: conf.listenPort, peers: [{ upsert: p1 }, { upsert: p2 }] });
  out('set', { viaWg: await dev.get(), viaUapi: await user.get(), publicKey: key.publicKey });
  // p2 moves: its allowed IPs are replaced, not added to; its endpoint and keepalive change.
  await dev.set({ peers: [{ upsert: { ...p2, allowedIps: conf.moved.allowedIps, endpoint: conf.moved.endpoint, keepalive: conf.moved.keepalive } }] });
  out('moved', { viaWg: await dev.get(), viaUapi: await user.get() });
  // REMOVED: the peer is gone from the interface in the one call.
  await dev.set({ peers: [{ remove: p1.publicKey }] });
  out('removed', { viaWg: await dev.get(), viaUapi: await user.get() });
  // An empty change runs nothing (no process for nothing).
  await dev.set({ peers: [] });
  out('empty', { viaWg: await dev.get() });
} catch (e) {
  out('error', codeOf(e));
} finally {
  await user.down();
}
out('done', { socketLeft: existsSync(join('/var/run/wireguard', `${conf.ifname}.sock`)) });
