/**
 * The filter component enforced on the tunnel interface, in the mesh's own table (one per
 * interface, every rule marked `meshp:`): from a peer arrives only what the policy allows, and
 * nothing at all from or to a peer in its grace period (unscoped: dropped at once, established
 * flows too). New connections to an inbound-only peer are refused on the way out. Every peer in
 * the view (set `mesh`) reaches this node's foundation ports (the declaration's settings: store,
 * registry, bus, control …) whatever the policy: they are the mesh's own services — except a
 * control-node (set `control`): it is in every member's view by the mesh's own rule, not by the
 * policy, so on a member it reaches only what the policy's rules allow (the foundation ports are the
 * control-node's; every member reaches them there).
 *
 * Peers are elements of sets, so a one-peer delta is a few element changes; only a change of the
 * filter component rebuilds the table (one transaction: the old table is never half gone).
 */
import type { Filter, Peer, RouteGroup } from '@meshp/core';
// The control-node's tag: every member has it in view whatever the policy (core/src/delta/policy.ts),
// so its being a peer opens none of the member's foundation ports.
import { CONTROL_NODE_TAG } from '@meshp/core/delta';
import { hostRoute } from './peer-config.js';
import { parsePorts, type PortMatch } from './ports.js';

export const MARK = 'meshp:tunnel';

export function tableName(ifname: string): string {
  return `meshp_wg_${ifname.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

/** Hosts go to hash sets (constant cost per change); only real prefixes go to interval sets. */
interface Addrs {
  v4: string[];
  v6: string[];
  n4: string[];
  n6: string[];
}

const FAMILIES = [
  ['4', 'ip', 'ipv4_addr', ''],
  ['6', 'ip6', 'ipv6_addr', ''],
  ['4n', 'ip', 'ipv4_addr', ' flags interval;'],
  ['6n', 'ip6', 'ipv6_addr', ' flags interval;'],
] as const;
const KEY = { '4': 'v4', '6': 'v6', '4n': 'n4', '6n': 'n6' } as const;

interface Member extends Addrs {
  rules: readonly number[];
  inbound: boolean;
  /** A control-node: kept out of the foundation rule (set `control`). */
  control: boolean;
}

interface Rule {
  sourceTags: Set<string>;
  ports: PortMatch[];
  /** A rule to `route:NAME` (issue 26): enforced on the forwarded path to that group's prefixes, never on the node's own ports. */
  route: string | null;
}

const BARE_V4 = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

function split(addresses: readonly string[]): Addrs {
  const out: Addrs = { v4: [], v6: [], n4: [], n6: [] };
  // A peer's usual addresses, one bare IPv4 host: no route to parse.
  if (addresses.length === 1 && BARE_V4.test(addresses[0]!)) {
    out.v4.push(addresses[0]!);
    return out;
  }
  for (const route of addresses.map(hostRoute)) {
    const [ip, len] = route.split('/') as [string, string];
    const v6 = ip.includes(':');
    if (Number(len) === (v6 ? 128 : 32)) out[v6 ? 'v6' : 'v4'].push(ip);
    else out[v6 ? 'n6' : 'n4'].push(route);
  }
  return out;
}

function ruleOf(r: Filter['rules'][number]): Rule {
  const to = r.destinationTags[0] ?? '';
  return { sourceTags: new Set(r.sourceTags), ports: parsePorts(r.ports), route: to.startsWith('route:') ? to.slice('route:'.length) : null };
}

export class TunnelFilter {
  readonly table: string;
  #rules: Rule[] = [];
  #foundation: number[] = [];
  readonly #members = new Map<string, Member>();
  readonly #blocked = new Map<string, Addrs>();

  constructor(readonly ifname: string) {
    this.table = tableName(ifname);
  }

  get blocked(): string[] {
    return [...this.#blocked.keys()];
  }

  /** The foundation ports the table was built with (tcp): a change of them needs a rebuild. */
  get foundation(): number[] {
    return this.#foundation;
  }

  /** The whole table, replacing what is there: after a filter change, and at start. */
  rebuild(filter: Filter | undefined, peers: Iterable<Peer>, foundation: readonly number[] = [], served: readonly RouteGroup[] = []): string[] {
    this.#foundation = [...new Set(foundation)].filter((p) => Number.isInteger(p) && p > 0 && p < 65536).sort((a, b) => a - b);
    this.#rules = (filter?.rules ?? []).map(ruleOf);
    this.#byTags.clear();
    this.#members.clear();
    const T = `inet ${this.table}`;
    const c = `comment "${MARK}"`;
    const out = [`add table ${T}`, `delete table ${T}`, `add table ${T}`];
    const sets = ['blocked', 'inbound', 'mesh', 'control', ...this.#rules.map((_, i) => `r${i}`)];
    for (const s of sets) for (const [suffix, , type, flags] of FAMILIES) out.push(`add set ${T} ${s}${suffix} { type ${type};${flags} }`);
    const each = (f: (suffix: string, proto: string) => string) => FAMILIES.map(([suffix, proto]) => f(suffix, proto));
    const ifq = JSON.stringify(this.ifname);
    out.push(
      `add chain ${T} input { type filter hook input priority -1; policy accept; }`,
      `add chain ${T} output { type filter hook output priority -1; policy accept; }`,
      `add chain ${T} from_peers`,
      `add chain ${T} to_peers`,
      `add rule ${T} input iifname ${ifq} jump from_peers ${c}`,
      `add rule ${T} output oifname ${ifq} jump to_peers ${c}`,
      ...each((x, p) => `add rule ${T} from_peers ${p} saddr @blocked${x} drop ${c}`),
      `add rule ${T} from_peers ct state established,related accept ${c}`,
      `add rule ${T} from_peers ct state invalid drop ${c}`,
      `add rule ${T} from_peers icmp type { destination-unreachable, time-exceeded, parameter-problem } accept ${c}`,
      `add rule ${T} from_peers icmpv6 type { destination-unreachable, packet-too-big, time-exceeded, parameter-problem } accept ${c}`,
    );
    if (this.#foundation.length) {
      const ports = `{ ${this.#foundation.join(', ')} }`;
      out.push(...each((x, pr) => `add rule ${T} from_peers ${pr} saddr @mesh${x} ${pr} saddr != @control${x} tcp dport ${ports} accept ${c}`));
    }
    this.#rules.forEach((r, i) => {
      if (r.route !== null) return;
      for (const p of r.ports) {
        const match = p.protocol === 'any' ? '' : `${p.protocol} dport ${p.range} `;
        out.push(...each((x, pr) => `add rule ${T} from_peers ${pr} saddr @r${i}${x} ${match}accept ${c}`));
      }
    });
    out.push(...this.#forward(T, c, ifq, served));
    out.push(
      `add rule ${T} from_peers drop ${c}`,
      ...each((x, p) => `add rule ${T} to_peers ${p} daddr @blocked${x} drop ${c}`),
      `add rule ${T} to_peers ct state established,related accept ${c}`,
      ...each((x, p) => `add rule ${T} to_peers ${p} daddr @inbound${x} drop ${c}`),
    );
    // One element command per set: nft checks interval sets per command, so 10,000 single adds cost far more.
    const bySet = new Map<string, Addrs>();
    const into = (set: string, a: Addrs) => {
      const e = bySet.get(set) ?? { v4: [], v6: [], n4: [], n6: [] };
      for (const k of ['v4', 'v6', 'n4', 'n6'] as const) for (const x of a[k]) e[k].push(x);
      bySet.set(set, e);
    };
    for (const p of peers) {
      const m = this.#member(p);
      into('mesh', m);
      for (const i of m.rules) into(`r${i}`, m);
      if (m.inbound) into('inbound', m);
      if (m.control) into('control', m);
    }
    for (const a of this.#blocked.values()) into('blocked', a);
    for (const [set, a] of bySet) out.push(...this.#elements('add', set, a));
    return out;
  }

  /**
   * The forwarded path of a via node (issue 26): from the tunnel to the prefixes of the groups it
   * serves, only what a rule to `route:NAME` lets its sources send (a peer that put the prefixes in
   * its own allowed IPs by hand forwards nothing); replies and every other forwarded flow (a container's
   * published port reached over the tunnel) untouched. A flow this node's own DNAT sent on (Docker's
   * published ports) is not routed through it by the peer: it is let by before the prefixes are
   * matched, since an exit node's 0.0.0.0/0 holds the DNAT'd address too.
   */
  #forward(T: string, c: string, ifq: string, served: readonly RouteGroup[]): string[] {
    if (!served.length) return [];
    const out = [
      `add chain ${T} forward { type filter hook forward priority -1; policy accept; }`,
      `add chain ${T} to_routes`,
      `add rule ${T} forward iifname ${ifq} ct status dnat accept ${c}`,
    ];
    const FAMS = [
      [false, 'ip', '4'],
      [true, 'ip6', '6'],
    ] as const;
    const of = (xs: readonly string[], v6: boolean) => xs.filter((x) => x.includes(':') === v6);
    const all = served.flatMap((g) => g.prefixes);
    for (const [v6, pr] of FAMS)
      if (of(all, v6).length) out.push(`add rule ${T} forward iifname ${ifq} ${pr} daddr { ${of(all, v6).join(', ')} } jump to_routes ${c}`);
    for (const [, pr, x] of FAMS) for (const set of [`blocked${x}`, `blocked${x}n`]) out.push(`add rule ${T} to_routes ${pr} saddr @${set} drop ${c}`);
    out.push(`add rule ${T} to_routes ct state established,related accept ${c}`);
    this.#rules.forEach((r, i) => {
      const g = served.find((x) => x.name === r.route);
      if (!g) return;
      for (const p of r.ports) {
        const match = p.protocol === 'any' ? '' : `${p.protocol} dport ${p.range} `;
        for (const [v6, pr, x] of FAMS) {
          const dst = of(g.prefixes, v6);
          if (!dst.length) continue;
          for (const set of [`r${i}${x}`, `r${i}${x}n`])
            out.push(`add rule ${T} to_routes ${pr} daddr { ${dst.join(', ')} } ${pr} saddr @${set} ${match}accept ${c}`);
        }
      }
    });
    out.push(`add rule ${T} to_routes drop ${c}`);
    return out;
  }

  /** The peer's addresses in the sets of the rules it meets (and in `inbound` when inbound only). */
  upsert(peer: Peer): string[] {
    const before = this.#members.get(peer.id);
    const same =
      before !== undefined && JSON.stringify(split(peer.addresses)) === JSON.stringify(split([...before.v4, ...before.v6, ...before.n4, ...before.n6]));
    const out = this.remove(peer.id, same);
    const m = this.#member(peer);
    if (!same) out.push(...this.#elements('add', 'mesh', m));
    for (const i of m.rules) out.push(...this.#elements('add', `r${i}`, m));
    if (m.inbound) out.push(...this.#elements('add', 'inbound', m));
    if (m.control) out.push(...this.#elements('add', 'control', m));
    return out;
  }

  #member(peer: Peer): Member {
    const a = split(peer.addresses) as Member;
    a.rules = this.#rulesOf(peer.tags);
    a.inbound = peer.inboundOnly;
    a.control = peer.tags.includes(CONTROL_NODE_TAG);
    this.#members.set(peer.id, a);
    return a;
  }

  /** The rules whose sources a peer with these tags is among; peers share a few tag sets, so each is worked out once (until a rebuild). */
  readonly #byTags = new Map<string, readonly number[]>();

  #rulesOf(tags: readonly string[]): readonly number[] {
    const key = tags.join('\0');
    let rules = this.#byTags.get(key);
    if (!rules) {
      rules = this.#rules.flatMap((r, i) => (tags.some((t) => r.sourceTags.has(t)) ? [i] : []));
      this.#byTags.set(key, rules);
    }
    return rules;
  }

  /** The peer out of every set (`keepMesh`: an upsert with the same addresses leaves it a mesh member). */
  remove(id: string, keepMesh = false): string[] {
    const m = this.#members.get(id);
    if (!m) return [];
    this.#members.delete(id);
    const out: string[] = keepMesh ? [] : this.#elements('delete', 'mesh', m);
    for (const i of m.rules) out.push(...this.#elements('delete', `r${i}`, m));
    if (m.inbound) out.push(...this.#elements('delete', 'inbound', m));
    if (m.control) out.push(...this.#elements('delete', 'control', m));
    return out;
  }

  /** Nothing passes to or from these addresses any more, established flows included. */
  block(id: string, addresses: readonly string[]): string[] {
    if (this.#blocked.has(id)) return [];
    const a = split(addresses);
    this.#blocked.set(id, a);
    return this.#elements('add', 'blocked', a);
  }

  unblock(id: string): string[] {
    const a = this.#blocked.get(id);
    if (!a) return [];
    this.#blocked.delete(id);
    return this.#elements('delete', 'blocked', a);
  }

  deleteTable(): string[] {
    return [`add table inet ${this.table}`, `delete table inet ${this.table}`];
  }

  #elements(op: 'add' | 'delete', set: string, a: Addrs): string[] {
    const out: string[] = [];
    for (const [suffix] of FAMILIES) {
      const xs = a[KEY[suffix]];
      if (xs.length) out.push(`${op} element inet ${this.table} ${set}${suffix} { ${xs.join(', ')} }`);
    }
    return out;
  }
}
