/**
 * The machine's resolver pointed at the mesh's through its manager's per-link interface, never by
 * writing the manager's files or `/etc/resolv.conf` (found things on an adopted node, record 0002):
 * systemd-resolved takes a DNS server and the routing domain `~<domain>` on the tunnel link
 * (`resolvectl`), resolvconf and openresolv an interface entry of the mesh's own. Removed when the
 * node leaves or the resolver stops. A manager with no per-link interface a plugin speaks is held,
 * and said so.
 */
import type { ResolverManagerKind, ResolverManagerSeen } from '@meshp/core/lifecycle';
import type { Runner } from './run.js';

/** What the machine's resolver is told: the tunnel link, the resolver on it, the names it answers. */
export interface MeshLink {
  interface: string;
  address: string;
  port: number;
  domain: string;
  searchDomains: readonly string[];
}

/** The commands, as found on PATH unless told (a test runs them in a mount namespace of its own). */
export interface ManagerCommands {
  resolvectl: readonly string[];
  resolvconf: readonly string[];
}

export const DEFAULT_COMMANDS: ManagerCommands = { resolvectl: ['resolvectl'], resolvconf: ['resolvconf'] };

interface Integrator {
  /** Sets the entry; answers how it was set, one line. Throws when the manager refused. */
  set(link: MeshLink): Promise<string>;
  /** Takes it away again; answers what was removed. */
  remove(link: MeshLink): Promise<string>;
}

/**
 * Debian's resolvconf orders entries by `/etc/resolvconf/interface-order`, where `tun*` comes before
 * the machine's own links: named so, the mesh's resolver is the first the C library asks (it
 * forwards every other name to the rest). openresolv lists `lo*` first, then its `dynamic_order`
 * (`tap[0-9]* tun[0-9]* … wg[0-9]*`), then every entry without a metric, and entries with a metric
 * (`-m`) last whatever the metric: so its entry is named into `tun[0-9]*`, with no metric (run
 * against Debian's openresolv 3.12: `-m 0` put the mesh after the machine's own).
 */
export const resolvconfEntry = (kind: 'resolvconf' | 'openresolv', ifname: string): string =>
  kind === 'resolvconf' ? `tun-${ifname}.meshp` : `tun0.${ifname}.meshp`;

/**
 * The name an agent before this one gave its openresolv entry (`-m 0` and no `tun` prefix; it sorted
 * after the machine's own). Removed with `-f` (no error if absent) whenever the entry is set or
 * removed, so a node updated in place neither keeps a second mesh entry nor leaves one behind.
 */
export const legacyOpenresolvEntry = (ifname: string): string => `${ifname}.meshp`;

function entryText(link: MeshLink): string {
  const search = [link.domain, ...link.searchDomains.filter((d) => d !== link.domain)];
  return `nameserver ${link.address}\nsearch ${search.join(' ')}\n`;
}

async function must(run: Runner, argv: readonly string[], input?: string): Promise<void> {
  const r = await run(argv, input);
  if (r.code !== 0) throw new Error(`${argv.join(' ')}: exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().split('\n')[0]}` : ''}`);
}

function systemdResolved(run: Runner, cmd: ManagerCommands): Integrator {
  return {
    async set(link) {
      const server = link.port === 53 ? link.address : `${link.address}:${link.port}`;
      await must(run, [...cmd.resolvectl, 'dns', link.interface, server]);
      await must(run, [...cmd.resolvectl, 'domain', link.interface, `~${link.domain}`, ...link.searchDomains]);
      return `through systemd-resolved (${link.interface}: DNS ${server}, domain ~${link.domain})`;
    },
    async remove(link) {
      await must(run, [...cmd.resolvectl, 'revert', link.interface]);
      return `systemd-resolved's DNS and domains on ${link.interface} (resolvectl revert)`;
    },
  };
}

function resolvconf(kind: 'resolvconf' | 'openresolv', run: Runner, cmd: ManagerCommands): Integrator {
  return {
    async set(link) {
      if (link.port !== 53) throw new Error(`the resolver answers on port ${link.port}, and resolv.conf names no port`);
      const entry = resolvconfEntry(kind, link.interface);
      await must(run, [...cmd.resolvconf, '-a', entry], entryText(link));
      if (kind === 'openresolv') await must(run, [...cmd.resolvconf, '-f', '-d', legacyOpenresolvEntry(link.interface)]);
      return `through ${kind} (${entry}: nameserver ${link.address}, search ${[link.domain, ...link.searchDomains].join(' ')})`;
    },
    async remove(link) {
      const entry = resolvconfEntry(kind, link.interface);
      await must(run, [...cmd.resolvconf, '-d', entry]);
      if (kind === 'openresolv') await must(run, [...cmd.resolvconf, '-f', '-d', legacyOpenresolvEntry(link.interface)]);
      return `${kind}'s entry ${entry}`;
    },
  };
}

/** Why a kind with no per-link interface spoken here is held. */
const HELD: Record<Exclude<ResolverManagerKind, 'systemd-resolved' | 'resolvconf' | 'openresolv'>, (m: ResolverManagerSeen) => string> = {
  // Coded (MESHP_PROVIDER_MISSING, no plugin provides it), in either mode: the mesh never writes behind NetworkManager, which would write over it.
  networkmanager: (m) =>
    `MESHP_PROVIDER_MISSING: NetworkManager writes the resolver configuration (${m.seen}) and no plugin speaks its per-connection DNS: the mesh writes nothing behind it, adopted or converged (NetworkManager with dns=systemd-resolved is spoken through resolvectl; with dns=none or rc-manager=unmanaged the file is a plain one)`,
  file: (m) => `${m.seen}, found: never written on an adopted node`,
  none: (m) => m.seen,
  unknown: (m) => `a manager no plugin speaks${m.program ? `, ${m.program}` : ''} (${m.seen})`,
};

/** The integrator for a manager with a per-link interface, or why it is held. */
export function integratorFor(m: ResolverManagerSeen, run: Runner, cmd: ManagerCommands): Integrator | { held: string } {
  switch (m.kind) {
    case 'systemd-resolved':
      return systemdResolved(run, cmd);
    case 'resolvconf':
    case 'openresolv':
      return resolvconf(m.kind, run, cmd);
    default:
      return { held: HELD[m.kind](m) };
  }
}

export const HELD_PREFIX = 'DNS not integrated: the resolver configuration is held';
