/**
 * What the DNS tests share (dns-resolver, dns-resolvconf, dns-resolv-conf-converged): a controller
 * in memory with a control-node serving the store and nodes a and b (a may reach b), a stand-in for
 * the tunnel's link carrying a's mesh address, and dnsmasq as a found or corporate resolver, each
 * in a namespace the test made and ended with it.
 */
import { spawn } from 'node:child_process';
import { CONTROL_NODE_TAG } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import type { Netns } from './netns.js';

interface Teardownable {
  teardown(fn: () => void | Promise<void>): void;
}

/** Network `lab`: cn (the control-node, with the store), a and b, more given by `more`; the policy a → b. */
export function dnsController(more: string[] = []): { c: Controller; addr: (id: string) => string } {
  const c = new Controller(new MemoryStore());
  c.createNetwork('lab');
  c.defineModule('lab', { name: 'store' });
  c.join('lab', { id: 'cn', nodeKey: 'kcn', tags: [CONTROL_NODE_TAG] });
  c.assignModule('lab', 'cn', 'store');
  for (const id of ['a', 'b', ...more]) c.join('lab', { id, nodeKey: `k${id}`, tags: [id] });
  c.setPolicy('lab', [{ from: 'a', to: 'b' }]);
  return { c, addr: (id) => c.member('lab', id)!.addresses[0]! };
}

/**
 * The tunnel's link, standing in: `address` on a link of the namespace named `ifname` (no dummy
 * module on these machines: one end of a veth pair, the other `peer`).
 */
export async function meshLink(ns: Netns, ifname: string, peer: string, address: string): Promise<void> {
  await ns.exec('ip', ['link', 'add', ifname, 'type', 'veth', 'peer', 'name', peer]);
  await ns.exec('ip', ['addr', 'add', `${address}/32`, 'dev', ifname]);
  await ns.exec('ip', ['link', 'set', ifname, 'up']);
}

/** dnsmasq answering `addresses` (`/domain/ip`) on `listen`:53 in the namespace; its queries logged to `log` when given. */
export function dnsmasq(t: Teardownable, ns: Netns, listen: string, addresses: string[], pidFile: string, log?: string): void {
  const args = ['--keep-in-foreground', '--no-resolv', '--no-hosts', '--conf-file=/dev/null', '--user=root', '--bind-interfaces'];
  args.push(`--listen-address=${listen}`, '--port=53', `--pid-file=${pidFile}`, ...(log ? ['--log-queries', `--log-facility=${log}`] : []));
  for (const a of addresses) args.push(`--address=${a}`);
  const [cmd, rest] = ns.wrap('dnsmasq', args);
  const p = spawn(cmd, rest, { stdio: 'ignore' });
  t.teardown(() => {
    if (p.exitCode === null) p.kill('SIGKILL');
  });
}
