/**
 * Where each door is reachable from now, through the live filter tables of both families (one
 * iptables-save per family): INPUT for a listening socket, FORWARD for a published port, with the
 * user chains they jump to, read into core's reach rules and walked there. Docker's own chains are
 * Docker's NAT doing its job: with Docker present a published port is forwarded unless a rule of
 * the found firewall (in FORWARD or DOCKER-USER) drops it, whatever FORWARD's policy, which Docker
 * sets to DROP itself.
 */
import type { Door, Protocol, Reach, TrafficPath } from '@meshp/core';
import { cidrSpan, reachThrough, type IpFamily, type PortMatch, type ReachChain, type ReachRule, type Span } from '@meshp/core/net';
import { DERIVED_PREFIX, isDockerChain } from './chains.js';
import type { Family } from './cidr.js';
import { markOf } from './marks.js';
import { formatArgs, type SavedTable } from './save-format.js';
import { familyName } from './tool.js';

const PROTOCOL_NUMBERS: Record<string, Protocol> = { tcp: 'tcp', udp: 'udp', '6': 'tcp', '17': 'udp' };
/** Options without a value. */
const FLAGS = new Set(['--log-uid', '--rcheck', '--update', '--set', '--rsource']);

function portRanges(text: string | undefined): [number, number][] | null {
  if (!text) return null;
  const out: [number, number][] = [];
  for (const part of text.split(',')) {
    const m = /^(\d*)(?::(\d*))?$/.exec(part);
    if (!m || (m[1] === '' && m[2] === undefined)) return null;
    const lo = m[1] === '' ? 0 : Number(m[1]);
    const hi = m[2] === undefined ? lo : m[2] === '' ? 65535 : Number(m[2]);
    out.push([lo, hi]);
  }
  return out;
}

function sourceSpans(text: string | undefined): Span[] | null {
  if (!text) return null;
  try {
    return text.split(',').map((c) => cidrSpan(c));
  } catch {
    return null;
  }
}

/** One rule's arguments as core's reach rule; a match it cannot read makes it opaque (it matches nothing). */
export function reachRule(args: readonly string[], chains: ReadonlySet<string>, found: boolean): ReachRule {
  const r: ReachRule = { verdict: 'none', found };
  let negate = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '!') {
      negate = true;
      continue;
    }
    const value = args[i + 1];
    const take = () => {
      i++;
      return value;
    };
    switch (a) {
      case '-p':
      case '--protocol': {
        const p = take();
        if (p === 'all') break;
        const proto = PROTOCOL_NUMBERS[p ?? ''];
        r.protocols = negate ? (['tcp', 'udp'] as Protocol[]).filter((x) => x !== proto) : proto ? [proto] : [];
        break;
      }
      case '-s':
      case '--source': {
        const s = sourceSpans(take());
        if (s) r.sources = { spans: s, negate };
        else r.opaque = true;
        break;
      }
      case '-m':
      case '--match':
      case '--comment':
        take();
        break;
      case '--dport':
      case '--destination-port':
      case '--dports':
      case '--destination-ports': {
        const p = portRanges(take());
        if (p) r.dport = { ranges: p, negate } satisfies PortMatch;
        else r.opaque = true;
        break;
      }
      case '--ctorigdstport': {
        const p = portRanges(take());
        if (p) r.origDport = { ranges: p, negate };
        else r.opaque = true;
        break;
      }
      case '--ctstate':
      case '--state': {
        const states = (take() ?? '').split(',');
        // A new connection is NEW: a rule on other states sees only connections already under way.
        if (states.includes('NEW') === negate) r.notNew = true;
        r.invalid = states.includes('INVALID') === negate ? 'skips' : 'matches';
        break;
      }
      case '--dst-type': {
        // `-m addrtype`: a door's traffic is unicast, to this host's own address on the incoming path
        // (LOCAL), to a container's after DNAT on the forwarded one; never BROADCAST, MULTICAST … (ufw's
        // ufw-not-local RETURNs LOCAL, then drops the rest).
        const types = (take() ?? '').split(',');
        const on = (path: TrafficPath) => types.includes('UNICAST') || (path === 'incoming' && types.includes('LOCAL'));
        const paths = (['incoming', 'forwarded'] as const).filter((p) => on(p) !== negate && (!r.paths || r.paths.includes(p)));
        if (paths.length === 0) r.loopback = true; // matches no new connection from a range (see ReachRule.loopback)
        else r.paths = paths;
        break;
      }
      case '--ctdir':
        // A new connection's packets go in the original direction.
        if ((take() === 'ORIGINAL') === negate) r.notNew = true;
        break;
      case '--ctstatus': {
        const s = (take() ?? '').split(',');
        if (!negate && s.includes('DNAT')) r.paths = ['forwarded'];
        else r.opaque = true;
        break;
      }
      case '-j':
      case '--jump':
      case '-g':
      case '--goto': {
        const t = take() ?? '';
        const go = a === '-g' || a === '--goto';
        if (t === 'ACCEPT') r.verdict = 'accept';
        else if (t === 'DROP' || t === 'REJECT') r.verdict = 'drop';
        else if (t === 'RETURN') r.verdict = 'return';
        else if (chains.has(t)) Object.assign(r, { verdict: go ? 'goto' : 'jump', target: t });
        // A target's own options follow it; none of them match packets.
        i = args.length;
        break;
      }
      case '--limit':
      case '--limit-burst':
        // `-m limit` matches what is under its rate: at a new connection's pace, every packet.
        take();
        break;
      case '--syn':
        // A new connection's first packet is a SYN: the door's traffic.
        break;
      case '--tcp-flags': {
        const mask = take();
        const set = args[i + 1];
        i++;
        // FIN,SYN,RST,ACK SYN (or the like): an initial SYN, the door's traffic; anything else unread.
        if (negate || !mask || set !== 'SYN' || !/SYN/.test(mask) || !/ACK/.test(mask)) r.opaque = true;
        break;
      }
      case '-i':
      case '--in-interface': {
        // Only the host's own traffic comes in on lo: a rule on it never sees a range's new connection.
        const lo = take() === 'lo';
        if (lo && !negate) r.loopback = true;
        else if (!lo) r.opaque = true;
        break;
      }
      case '-d':
      case '--destination': {
        const d = take() ?? '';
        if (!negate && /^(127\.|::1(\/128)?$)/.test(d)) r.loopback = true;
        else r.opaque = true;
        break;
      }
      default:
        // An interface, a destination, a module's option we do not read: the rule is opaque.
        r.opaque = true;
        if (!FLAGS.has(a) && value !== undefined && !value.startsWith('-')) i++;
    }
    negate = false;
  }
  return r;
}

/** The builtin chain of a path in one family's filter table, with the user chains it can jump to. */
export function reachChain(filter: SavedTable, family: Family, path: Door['path']): ReachChain | null {
  const name = path === 'incoming' ? 'INPUT' : 'FORWARD';
  const builtin = filter.chains.find((c) => c.name === name);
  if (!builtin) return null;
  const docker = filter.chains.some((c) => isDockerChain(c.name));
  const names = new Set(filter.chains.filter((c) => !isDockerChain(c.name)).map((c) => c.name));
  const read = (chain: string) =>
    filter.rules
      .filter((r) => r.chain === chain)
      .map((r) => ({
        ...reachRule(r.args, names, !markOf(r.args) && !chain.startsWith(DERIVED_PREFIX)),
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
