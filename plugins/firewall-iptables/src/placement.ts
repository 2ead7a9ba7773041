/**
 * Where the found chains drop, and where one of the mesh's accepts goes in them: the placement
 * rule (core's placeOpening) read in one family's filter table, with DOCKER-USER read as Docker
 * means it. Used by `ensure` (plan.ts) and by re-enabling a retired firewall (retire.ts).
 */
import type { Door } from '@meshp/core';
import {
  cidrSpan,
  placeOpening,
  portClasses,
  spansToSet,
  subtract,
  wholeOf,
  type AddressSet,
  type IpFamily,
  type Placement,
  type ReachChain,
} from '@meshp/core/net';
import { DOCKER_USER, isForeignChain } from './chains.js';
import type { Family } from './cidr.js';
import { isDrop, markOf, targetOf, type MarkedSpec } from './marks.js';
import { reachChain } from './reach.js';
import { chainRules, optionValue, type SavedTable } from './save-format.js';

/** User chains (not Docker's, not ours) holding a drop or reject: a jump to one is a drop point. */
export function droppingChains(filter: SavedTable | undefined): Set<string> {
  const out = new Set<string>();
  for (const r of filter?.rules ?? []) {
    if (!isForeignChain(r.chain) && isDrop(r.args) && !markOf(r.args)) out.add(r.chain);
  }
  return out;
}

/** A builtin chain drops when its policy is DROP or an unmarked rule in it drops (directly or by a jump). */
export function chainDrops(filter: SavedTable | undefined, chain: string): boolean {
  if (!filter) return false;
  if (filter.chains.find((c) => c.name === chain)?.policy === 'DROP') return true;
  const dropping = droppingChains(filter);
  return chainRules(filter, chain).some((r) => !markOf(r.args) && !dropsInvalidOnly(r.args) && (isDrop(r.args) || dropping.has(targetOf(r.args) ?? '')));
}

/** `-m conntrack --ctstate INVALID -j DROP` drops no valid new connection: an accept goes after it, not before. */
export function dropsInvalidOnly(args: readonly string[]): boolean {
  const state = optionValue(args, '--ctstate') ?? optionValue(args, '--state');
  return state === 'INVALID' && isDrop(args);
}

/** The sources a marked rule admits, as an address set of its family. */
function rangeOf(family: Family, s: Pick<MarkedSpec, 'source' | 'negated'>): AddressSet {
  const whole = wholeOf([family as IpFamily]);
  if (!s.source) return whole;
  const named = spansToSet([cidrSpan(s.source)]);
  return s.negated ? subtract(whole, named) : named;
}

/**
 * Where one accepting spec goes in its chain, by the placement rule (core's placeOpening): the
 * chain's rules as read for the reach walk, the mesh's own rules not counted. Null: the chain
 * needs no opening for this traffic (nothing in it drops all of it).
 */
export function placementOf(family: Family, filter: SavedTable | undefined, s: MarkedSpec): Placement {
  if (!filter) return { kind: 'none' };
  // Read once per table as parsed (a save is never edited after it is read): each path's reach
  // chain, and one placement per port class (core's portClasses), as the nftables plugin does.
  let memo = MEMO.get(filter);
  if (!memo) MEMO.set(filter, (memo = { chains: new Map(), places: new Map() }));
  const ck = `${family}|${s.path}`;
  let c = memo.chains.get(ck);
  if (c === undefined) {
    const chain = reachChain(filter, family, s.path);
    memo.chains.set(ck, (c = chain ? { chain, classOf: portClasses(chain) } : null));
  }
  if (!c) return { kind: 'none' };
  const key = `${ck}|${s.chain === DOCKER_USER ? 'D' : ''}|${s.source ?? '*'}|${s.negated ? 1 : 0}|${s.protocol}|${c.classOf(s.port)}`;
  let p = memo.places.get(key);
  if (!p) {
    const door = { port: s.port, protocol: s.protocol, path: s.path };
    p = s.chain === DOCKER_USER ? dockerUserPlacement(filter, c.chain, door, rangeOf(family, s)) : placeOpening(c.chain, door, rangeOf(family, s));
    memo.places.set(key, p);
  }
  return p;
}

const MEMO = new WeakMap<
  SavedTable,
  { chains: Map<string, { chain: ReachChain; classOf: (port: number) => number } | null>; places: Map<string, Placement> }
>();

/**
 * DOCKER-USER is where Docker says the administrator's forward rules go, ahead of its own chains
 * (which the mesh never edits): the placement rule read in it as if it ended in a drop — what it
 * lets through meets Docker's `! -i docker0 -o docker0 -j DROP` for any port Docker does not
 * publish itself. So the accept goes below the administrator's bans there (`-s … -j DROP`), above
 * a drop of all of it, and at the latest just above the chain's closing bare `-j RETURN`.
 */
function dockerUserPlacement(filter: SavedTable, forward: ReachChain, door: Door, range: AddressSet): Placement {
  const raw = chainRules(filter, DOCKER_USER);
  const rules = forward.regular.get(DOCKER_USER) ?? [];
  const ret = raw.findIndex((r) => !markOf(r.args) && r.args.length === 2 && r.args[0] === '-j' && r.args[1] === 'RETURN');
  const head = ret < 0 ? rules : rules.slice(0, ret);
  const p = placeOpening({ ...forward, policy: 'drop', rules: head, label: DOCKER_USER }, door, range);
  if (p.kind !== 'end' || ret < 0) return p;
  return { kind: 'before', index: ret, after: p.after, ...(p.invalid ? { invalid: true } : {}) };
}
