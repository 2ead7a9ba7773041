/**
 * Two `meshp controller serve` replicas on one PostgreSQL database and four agents spread over them
 * (SimAgents over real gRPC on loopback, two listing A first, two listing B first), for the fault
 * tests of the shared store (issue 24): what each replica and agent says, and the checks they share.
 */
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { isMeshpError } from '@meshp/core';
import { nodes, replicaState, startController, tokenFor, waitUntil, workdir, type ControllerProc } from './grpc-procs.js';
import { SimAgent } from './sim-agent.js';
import type { Subtest } from './tap-types.js';
import { Deadline } from './budget.js';

export interface Replicas {
  a: ControllerProc;
  b: ControllerProc;
  agents: SimAgent[];
  /** Which replica each agent is on (by its first address). */
  home: Map<SimAgent, ControllerProc>;
  /** The network's version on a replica, as its node list says. */
  version(ctl: ControllerProc): Promise<number>;
  /** Every agent applied `v` and its replica shows gap 0 for it. */
  current(v: number): Promise<boolean>;
  /** A policy set through `ctl` (ports: to make each one a change). */
  change(ctl: ControllerProc, ports: string[]): Promise<unknown>;
}

export async function startReplicas(t: Subtest, url: string, tag: string): Promise<Replicas> {
  const dir = workdir(t, tag);
  const flags = ['--store', url, '--sync-flush-ms', '200'];
  const a = await startController(t, join(dir, 'a'), flags);
  replicaState(join(dir, 'a'), join(dir, 'b'));
  const b = await startController(t, join(dir, 'b'), flags);
  const { fingerprint } = readAdminCredential(join(dir, 'a', ADMIN_CREDENTIAL_FILE));
  const home = new Map<SimAgent, ControllerProc>();
  const agents: SimAgent[] = [];
  for (const [i, ctl, order] of [
    [0, a, [a.address, b.address]],
    [1, a, [a.address, b.address]],
    [2, b, [b.address, a.address]],
    [3, b, [b.address, a.address]],
  ] as const) {
    const x = new SimAgent(`n${i}`, [...order], fingerprint);
    agents.push(x);
    home.set(x, ctl);
  }
  t.teardown(() => agents.forEach((x) => x.close()));
  for (const x of agents) await x.enrol(await tokenFor(a, ['all']));
  for (const x of agents) x.open();
  const version = async (ctl: ControllerProc) => (await nodes(ctl))[0]!.stateVersion;
  const current = async (v: number) => {
    for (const ctl of [a, b]) {
      const rows = await nodes(ctl);
      for (const x of agents.filter((y) => home.get(y) === ctl)) {
        const row = rows.find((r) => r.name === x.name);
        if (x.applier.appliedVersion !== v || !row || row.gap !== 0 || row.appliedVersion !== v) return false;
      }
    }
    return true;
  };
  const change = async (ctl: ControllerProc, ports: string[]) =>
    (await ctl.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports }] });
  const v0 = await version(a);
  await waitUntil(`every agent at ${v0}`, () => current(v0), 60_000);
  return { a, b, agents, home, version, current, change };
}

/** How an admin call ended, and how long it took (ms). */
export async function timed(f: () => Promise<unknown>): Promise<{ code: string | null; ms: number }> {
  const t0 = Date.now();
  try {
    await f();
    return { code: null, ms: Date.now() - t0 };
  } catch (e) {
    return { code: isMeshpError(e) ? e.code : String(e), ms: Date.now() - t0 };
  }
}

/** The lines a replica logged since `from` with this message, by node. */
export function logged(ctl: ControllerProc, from: number, msg: string): unknown[] {
  return ctl.proc.lines
    .slice(from)
    .filter((l) => l.msg === msg)
    .map((l) => l.node);
}

/** A change through `ctl`, tried until one is taken (the replica serves again), within `idleSeconds`. */
export async function changeWhenUp(r: Replicas, ctl: ControllerProc, ports: string[], idleSeconds: number): Promise<void> {
  const d = new Deadline(idleSeconds * 1000);
  for (;;) {
    const { code } = await timed(() => r.change(ctl, ports));
    if (code === null) return;
    if (d.expired()) throw new Error(`no change taken through ${ctl.address} within ${idleSeconds} s (last: ${code})`);
    await new Promise((res) => setTimeout(res, 500));
  }
}
