// @meshp/core/net: addresses, ranges and spans, and what a chain of firewall rules lets through
// (the firewall plugins' arithmetic).
export { overlaps, contains } from './cidr.js';
export { addressFamily, addressText, addressToBigInt, parseRange, FAMILY_BITS, type Range } from './address.js';
export { reachThrough, allowedBy, matchOf, mentions, possibleOf, type ReachRule, type ReachChain, type PortMatch, type RuleHit } from './reach.js';
export {
  cidrSpan,
  complement,
  toCidrs,
  spansToSet,
  wholeOf,
  subtract,
  intersect,
  isEmpty,
  union,
  NOWHERE,
  type Span,
  type IpFamily,
  type AddressSet,
} from './spans.js';
export { deniesInvalid, invalidDropAbove, placeOpening, portClasses, type Placement } from './placement.js';
export { synMeets, tcpFlagSet } from './tcp-flags.js';
export { arrivalsOf, arrivingOn, interfacesOf, routesFromIpJson, type Arrivals, type RouteEntry } from './interfaces.js';
