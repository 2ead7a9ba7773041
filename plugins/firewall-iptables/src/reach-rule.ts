/**
 * One iptables rule's arguments read as core's reach rule: each option by a reader of its own, in
 * the order the rule gives them. A match it cannot read makes the rule opaque (it matches nothing).
 */
import type { Protocol, TrafficPath } from '@meshp/core';
import { arrivingOn, cidrSpan, intersect, synMeets, tcpFlagSet, type Arrivals, type PortMatch, type ReachRule, type Span } from '@meshp/core/net';

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

/** One option of a rule, as its reader sees it. */
interface Option {
  name: string;
  /** The arguments after the option's name (its value first). */
  rest: readonly string[];
  /** Preceded by `!`. */
  negate: boolean;
  /** The user chains a jump may go to. */
  chains: ReadonlySet<string>;
  /** The sources arriving on each interface (core's interfaces.ts), when the routes were read. */
  arrivals?: Arrivals;
  /** The readable ipsets' members (ipsets.ts), when `ipset save` was read. */
  ipsets?: ReadonlyMap<string, readonly Span[]>;
}

/** Reads one option into the rule; answers how many of the arguments after its name it took. */
type OptionReader = (r: ReachRule, o: Option) => number;

const protocol: OptionReader = (r, { rest: [p], negate }) => {
  if (p === 'all') return 1;
  const proto = PROTOCOL_NUMBERS[p ?? ''];
  r.protocols = negate ? (['tcp', 'udp'] as Protocol[]).filter((x) => x !== proto) : proto ? [proto] : [];
  return 1;
};

const source: OptionReader = (r, { rest: [text], negate }) => {
  const s = sourceSpans(text);
  if (s) r.sources = { spans: s, negate };
  else r.opaque = true;
  return 1;
};

/** A module's name, a comment: they match every packet. */
const valueOnly: OptionReader = () => 1;

const destinationPort: OptionReader = (r, { rest: [text], negate }) => {
  const p = portRanges(text);
  if (p) r.dport = { ranges: p, negate } satisfies PortMatch;
  else r.opaque = true;
  return 1;
};

const originalPort: OptionReader = (r, { rest: [text], negate }) => {
  const p = portRanges(text);
  if (p) r.origDport = { ranges: p, negate };
  else r.opaque = true;
  return 1;
};

const connectionState: OptionReader = (r, { rest: [text], negate }) => {
  const states = (text ?? '').split(',');
  // A new connection is NEW: a rule on other states sees only connections already under way.
  if (states.includes('NEW') === negate) r.notNew = true;
  r.invalid = states.includes('INVALID') === negate ? 'skips' : 'matches';
  return 1;
};

/**
 * `-m addrtype --dst-type`: a door's traffic is unicast, to this host's own address on the incoming
 * path (LOCAL), to a container's after DNAT on the forwarded one; never BROADCAST, MULTICAST … (ufw's
 * ufw-not-local RETURNs LOCAL, then drops the rest).
 */
const destinationType: OptionReader = (r, { rest: [text], negate }) => {
  const types = (text ?? '').split(',');
  const on = (path: TrafficPath) => types.includes('UNICAST') || (path === 'incoming' && types.includes('LOCAL'));
  const paths = (['incoming', 'forwarded'] as const).filter((p) => on(p) !== negate && (!r.paths || r.paths.includes(p)));
  if (paths.length === 0)
    r.loopback = true; // matches no new connection from a range (see ReachRule.loopback)
  else r.paths = paths;
  return 1;
};

const connectionDirection: OptionReader = (r, { rest: [dir], negate }) => {
  // A new connection's packets go in the original direction.
  if ((dir === 'ORIGINAL') === negate) r.notNew = true;
  return 1;
};

const connectionStatus: OptionReader = (r, { rest: [text], negate }) => {
  const s = (text ?? '').split(',');
  if (!negate && s.includes('DNAT')) r.paths = ['forwarded'];
  else r.opaque = true;
  return 1;
};

/** `-j` / `-g`: the verdict, or a jump to a user chain; the target's own options follow it, and none of them match packets. */
const target: OptionReader = (r, { name, rest, chains }) => {
  const t = rest[0] ?? '';
  const go = name === '-g' || name === '--goto';
  if (t === 'ACCEPT') r.verdict = 'accept';
  else if (t === 'DROP' || t === 'REJECT') r.verdict = 'drop';
  else if (t === 'RETURN') r.verdict = 'return';
  else if (chains.has(t)) Object.assign(r, { verdict: go ? 'goto' : 'jump', target: t });
  return rest.length;
};

/** A rule a new connection's first packet (a SYN) never meets: it only sees connections under way. */
function meetsSyn(r: ReachRule, meets: boolean | null): void {
  if (meets === null) r.opaque = true;
  else if (!meets) r.notNew = true;
}

/** `--syn` is `--tcp-flags FIN,SYN,RST,ACK SYN`: the door's traffic; `! --syn` none of it. */
const syn: OptionReader = (r, { negate }) => {
  if (negate) r.notNew = true;
  return 0;
};

/** `--tcp-flags MASK COMP`: read against a SYN (core's synMeets): `FIN,SYN,RST,ACK SYN` the door's traffic, the NULL and XMAS scans' `ALL NONE`, `ALL ALL`, `! … SYN` none of it. */
const tcpFlags: OptionReader = (r, { rest: [mask, comp], negate }) => {
  const m = tcpFlagSet((mask ?? '').split(','));
  const c = tcpFlagSet((comp ?? '').split(','));
  meetsSyn(r, m && c ? synMeets(m, c, negate) : null);
  return 2;
};

/** `--match-set NAME src` (`-m set`): the set's members as sources, as the nft plugin reads named sets; other directions, or a set not read, unread. */
const matchSet: OptionReader = (r, { rest: [name, dirs], negate, ipsets }) => {
  const members = name ? ipsets?.get(name) : undefined;
  if (dirs === 'src' && members && !r.sources) r.sources = { spans: members, negate };
  else r.opaque = true;
  return 2;
};

/** `-f`: second and later fragments; a new connection's SYN is never one. */
const fragment: OptionReader = (r, { negate }) => {
  if (!negate) r.notNew = true;
  return 0;
};

const inInterface: OptionReader = (r, { rest: [name], negate, arrivals }) => {
  // Only the host's own traffic comes in on lo: a rule on it never sees a range's new connection.
  const lo = name === 'lo';
  if (lo && !negate) r.loopback = true;
  else if (!lo) {
    // Any other (`ens3`, `cali+`, negated): the sources whose route back leaves by it.
    const set = arrivals && name ? arrivingOn(arrivals, name, negate) : null;
    if (set) r.arrives = r.arrives ? intersect(r.arrives, set) : set;
    else r.opaque = true;
  }
  return 1;
};

const destination: OptionReader = (r, { rest: [text], negate }) => {
  const d = text ?? '';
  if (!negate && /^(127\.|::1(\/128)?$)/.test(d)) r.loopback = true;
  else r.opaque = true;
  return 1;
};

/** An interface, a destination, a module's option we do not read: the rule is opaque. */
const unread: OptionReader = (r, { name, rest: [value] }) => {
  r.opaque = true;
  return !FLAGS.has(name) && value !== undefined && !value.startsWith('-') ? 1 : 0;
};

const READERS: ReadonlyMap<string, OptionReader> = new Map([
  ['-p', protocol],
  ['--protocol', protocol],
  ['-s', source],
  ['--source', source],
  ['-m', valueOnly],
  ['--match', valueOnly],
  ['--comment', valueOnly],
  ['--dport', destinationPort],
  ['--destination-port', destinationPort],
  ['--dports', destinationPort],
  ['--destination-ports', destinationPort],
  ['--ctorigdstport', originalPort],
  ['--ctstate', connectionState],
  ['--state', connectionState],
  ['--dst-type', destinationType],
  ['--ctdir', connectionDirection],
  ['--ctstatus', connectionStatus],
  ['-j', target],
  ['--jump', target],
  ['-g', target],
  ['--goto', target],
  // `-m limit` matches what is under its rate: at a new connection's pace, every packet.
  ['--limit', valueOnly],
  ['--limit-burst', valueOnly],
  ['--syn', syn],
  ['--tcp-flags', tcpFlags],
  ['-f', fragment],
  ['--match-set', matchSet],
  ['--fragment', fragment],
  ['-i', inInterface],
  ['--in-interface', inInterface],
  ['-d', destination],
  ['--destination', destination],
]);

/** One rule's arguments as core's reach rule; a match it cannot read makes it opaque (it matches nothing). */
export function reachRule(
  args: readonly string[],
  chains: ReadonlySet<string>,
  found: boolean,
  arrivals?: Arrivals,
  ipsets?: ReadonlyMap<string, readonly Span[]>,
): ReachRule {
  const r: ReachRule = { verdict: 'none', found };
  let negate = false;
  for (let i = 0; i < args.length; i++) {
    const name = args[i]!;
    if (name === '!') {
      negate = true;
      continue;
    }
    const read = READERS.get(name) ?? unread;
    i += read(r, { name, rest: args.slice(i + 1), negate, chains, arrivals, ipsets });
    negate = false;
  }
  // `-m limit` passes what is under its rate: read as every packet (a new connection's pace) for
  // an accept, a log or a drop, but a limit that returns is a rate limit (the SYN_FLOOD
  // boilerplate's `-j RETURN` above a drop): which part it lets go is unknown, so the rule is
  // unread (core's placement then counts the drop below it as a partial denial).
  if (args.includes('--limit') && r.verdict === 'return') r.opaque = true;
  return r;
}
