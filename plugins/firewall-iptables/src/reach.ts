/**
 * Where each door is reachable from now, through the live filter tables of both families (one
 * iptables-save per family): INPUT for a listening socket, FORWARD for a published port, with the
 * user chains they jump to, read into core's reach rules (reach-rule.ts) and walked there.
 * Docker's own chains are Docker's NAT doing its job: with Docker present a published port is
 * forwarded unless a rule of the found firewall (in FORWARD or DOCKER-USER) drops it, whatever
 * FORWARD's policy, which Docker sets to DROP itself.
 */
import type { Door, Reach } from '@meshp/core';
import { reachThrough, type IpFamily, type ReachChain, type ReachRule } from '@meshp/core/net';
import { DERIVED_PREFIX, isDockerChain } from './chains.js';
import type { Family } from './cidr.js';
import { markOf } from './marks.js';
import { reachRule } from './reach-rule.js';
import { formatArgs, type SavedTable } from './save-format.js';
import { familyName } from './tool.js';

/**
 * The chains read once per table read: placing 1,000 openings read the whole chain again for each
 * (a no-op ensure with 1,000 present took 10 s: issue 31). A table is never changed once parsed
 * (save-format.ts), so the same object reads the same.
 */
const readChains = new WeakMap<SavedTable, Map<string, ReachChain | null>>();

/** The builtin chain of a path in one family's filter table, with the user chains it can jump to. */
export function reachChain(filter: SavedTable, family: Family, path: Door['path']): ReachChain | null {
  let byPath = readChains.get(filter);
  if (!byPath) readChains.set(filter, (byPath = new Map()));
  const key = `${family}/${path}`;
  if (!byPath.has(key)) byPath.set(key, readChain(filter, family, path));
  return byPath.get(key)!;
}

function readChain(filter: SavedTable, family: Family, path: Door['path']): ReachChain | null {
  const name = path === 'incoming' ? 'INPUT' : 'FORWARD';
  const builtin = filter.chains.find((c) => c.name === name);
  if (!builtin) return null;
  const docker = filter.chains.some((c) => isDockerChain(c.name));
  const names = new Set(filter.chains.filter((c) => !isDockerChain(c.name)).map((c) => c.name));
  const read = (chain: string) =>
    filter.rules
      .filter((r) => r.chain === chain)
      .map((r) => ({
        ...reachRule(r.args, names, !markOf(r.args) && !chain.startsWith(DERIVED_PREFIX), filter.arrivals, filter.ipsets),
        label: `${familyName(family)}tables -A ${chain} ${formatArgs(r.args)}`,
      }));
  const regular = new Map<string, readonly ReachRule[]>();
  for (const c of filter.chains) if (c.policy === null && names.has(c.name)) regular.set(c.name, read(c.name));
  // Docker sets FORWARD's policy to DROP and accepts published ports in its own chains.
  const policy = docker && path === 'forwarded' ? 'accept' : builtin.policy === 'DROP' ? 'drop' : 'accept';
  return { policy, families: [family as IpFamily], rules: read(name), regular, label: `${familyName(family)}tables ${name}` };
}

/** Each door's reach through the filter tables of both families, in the order asked. */
export function reachOfFilters(filters: Record<Family, SavedTable | undefined>, doors: readonly Door[], explain = false): Reach[] {
  const chainsOf = (path: Door['path']) =>
    ([4, 6] as const).flatMap((f) => {
      const t = filters[f];
      const c = t ? reachChain(t, f, path) : null;
      return c ? [c] : [];
    });
  const chains = { incoming: chainsOf('incoming'), forwarded: chainsOf('forwarded') };
  return doors.map((d) => reachThrough(chains[d.path], d, explain));
}
