/**
 * The rules this plugin writes, as a small canonical shape: built into nft JSON, and read back
 * from a listing into the same shape so "present" and "wanted" compare exactly.
 */
import { MeshpError, type Opening, type Protocol } from '@meshp/core';
import { canonical, isWhole, memoCanonical, parseCidr, splitFamilies, type IpFamily, type Range } from './cidr.js';
import { MARK } from './classify.js';
import type { Expr, Family, NftRule } from './schema.js';

export interface Shape {
  id: string;
  /** Which addresses the rule looks at: one family, or both ('any', no address match). */
  nf: IpFamily | 'any';
  /** Canonical CIDRs of `nf`; empty: every address of `nf`. */
  cidrs: string[];
  /** true: drop from everywhere except `cidrs` (refusals). */
  negate: boolean;
  protocol: Protocol;
  port: number;
  /** 'dport': the packet's own port (input); 'ct': the original destination before DNAT (forward). */
  match: 'dport' | 'ct';
  verdict: 'accept' | 'drop';
  /** `ct state != invalid`: an accept in a found chain that keeps invalid packets out (core's deniesInvalid). */
  valid?: boolean;
}

/** Ids travel in rule comments (128 bytes at most in nft). */
export function checkId(id: string): void {
  // UTF-8 takes at most 3 bytes per UTF-16 unit: a short id needs no counting.
  if ((MARK.length + 3 * id.length > 128 && Buffer.byteLength(MARK + id) > 128) || /[\n"]/.test(id)) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `opening id ${JSON.stringify(id)} cannot be carried in an nft comment (128 bytes, no quotes)`);
  }
}

/** Equal keys for equal shapes. The id leads; the fields after it never hold "|", so the key is unambiguous. */
export function shapeKey(s: Shape): string {
  return `${s.id}|${s.nf}|${s.cidrs.join(',')}|${s.negate ? 1 : 0}|${s.protocol}|${s.port}|${s.match}|${s.verdict}${s.valid ? '|valid' : ''}`;
}

/** Which addresses one of an opening's rules matches. */
type AddressPart = Pick<Shape, 'nf' | 'cidrs' | 'negate'>;

/**
 * The address parts of an opening's rules, by everything they depend on: thousands of openings
 * share a handful of address lists. The parts (and their `cidrs`) are shared, so they are frozen.
 */
const addressParts = new Map<string, readonly AddressPart[]>();

function addressesFor(o: Opening, family: Family, privateRange?: string): readonly AddressPart[] {
  // The refusal's own `except` (the declaration's private range) wins over the plugin option.
  const spared = o.except?.length ? o.except : privateRange ? [privateRange] : null;
  const key = `${family}|${o.action}|${o.from.join(',')}|${spared?.join(',') ?? ''}`;
  let parts = addressParts.get(key);
  if (!parts) {
    parts = computeAddresses(o, family, spared).map((p) => Object.freeze({ ...p, cidrs: Object.freeze(p.cidrs) as string[] }));
    if (addressParts.size > 10_000) addressParts.clear();
    addressParts.set(key, Object.freeze(parts));
  }
  return parts;
}

function computeAddresses(o: Opening, family: Family, spared: readonly string[] | null): AddressPart[] {
  const families: IpFamily[] = family === 'inet' ? ['ip', 'ip6'] : family === 'ip' ? ['ip'] : ['ip6'];
  const nfFor = (f: IpFamily, cidrs: string[]): Shape['nf'] => (family === 'inet' || cidrs.length > 0 ? f : 'any');
  const out: AddressPart[] = [];
  if (o.action === 'drop' && o.from.length === 0 && spared) {
    const exempt = splitFamilies(spared);
    for (const f of families) {
      const cidrs = isWhole(exempt[f]) ? null : exempt[f];
      if (cidrs) out.push({ nf: nfFor(f, cidrs), cidrs, negate: cidrs.length > 0 });
    }
    return out;
  }
  if (o.from.length === 0) return [{ nf: 'any', cidrs: [], negate: false }];
  const byFamily = splitFamilies(o.from);
  for (const f of families) {
    if (byFamily[f].length === 0) continue;
    const cidrs = isWhole(byFamily[f]) ? [] : byFamily[f];
    out.push({ nf: nfFor(f, cidrs), cidrs, negate: false });
  }
  return out;
}

/**
 * The rules an opening needs in a table of `family`. An accept matches its `from` ranges (none:
 * anywhere). A refusal (drop) drops from its `from` ranges; without any, from everywhere outside
 * its `except` ranges, else outside `privateRange` (or from everywhere when neither is given).
 */
export function shapesFor(o: Opening, family: Family, privateRange?: string): Shape[] {
  checkId(o.id);
  const match = o.path === 'forwarded' ? 'ct' : 'dport';
  return addressesFor(o, family, privateRange).map((p) => ({
    id: o.id,
    nf: p.nf,
    cidrs: p.cidrs,
    negate: p.negate,
    protocol: o.protocol,
    port: o.port,
    match,
    verdict: o.action,
  }));
}

function addrExpr(cidr: string): unknown {
  const [addr, len] = cidr.split('/') as [string, string];
  const full = addr.includes(':') ? 128 : 32;
  return Number(len) === full ? addr : { prefix: { addr, len: Number(len) } };
}

const VALID_MATCH: Expr = { match: { op: '!=', left: { ct: { key: 'state' } }, right: 'invalid' } };

export function buildExpr(s: Shape): Expr[] {
  const expr: Expr[] = [];
  if (s.cidrs.length > 0) {
    const right = s.cidrs.length === 1 ? addrExpr(s.cidrs[0]!) : { set: s.cidrs.map(addrExpr) };
    // Forwarded: the connection's original source, so replies of an allowed flow match the same way.
    const left = s.match === 'ct' ? { ct: { key: `${s.nf} saddr`, dir: 'original' } } : { payload: { protocol: s.nf, field: 'saddr' } };
    expr.push({ match: { op: s.negate ? '!=' : '==', left, right } });
  } else if (s.nf !== 'any') {
    expr.push({ match: { op: '==', left: { meta: { key: 'nfproto' } }, right: s.nf === 'ip' ? 'ipv4' : 'ipv6' } });
  }
  if (s.match === 'dport') {
    expr.push({ match: { op: '==', left: { payload: { protocol: s.protocol, field: 'dport' } }, right: s.port } });
  } else {
    expr.push({ match: { op: '==', left: { meta: { key: 'l4proto' } }, right: s.protocol } });
    expr.push({ match: { op: '==', left: { ct: { key: 'proto-dst', dir: 'original' } }, right: s.port } });
  }
  if (s.valid) expr.push(VALID_MATCH);
  expr.push({ [s.verdict]: null });
  return expr;
}

export function buildRule(s: Shape, where: { family: Family; table: string; chain: string }): NftRule {
  return { ...where, comment: MARK + s.id, expr: buildExpr(s) };
}

function toRanges(v: unknown, family: IpFamily): Range[] | null {
  if (typeof v === 'string') return [parseCidr(v)];
  if (typeof v !== 'object' || v === null) return null;
  const o = v as { prefix?: { addr: string; len: number }; range?: [string, string]; set?: unknown[] };
  if (o.prefix) return [parseCidr(`${o.prefix.addr}/${o.prefix.len}`)];
  if (o.range) {
    const [a, b] = o.range.map((x) => parseCidr(x));
    return a && b ? [{ family, lo: a.lo, hi: b.hi }] : null;
  }
  if (Array.isArray(o.set)) {
    const parts = o.set.map((x) => toRanges(x, family));
    return parts.every((p) => p !== null) ? (parts as Range[][]).flat() : null;
  }
  return null;
}

/** Reads one of our rules back; null when it is not a shape we write (then it is replaced). */
export function parseShape(rule: NftRule, id: string): Shape | null {
  const s: Partial<Shape> & { id: string } = { id, nf: 'any', cidrs: [], negate: false };
  try {
    for (const e of rule.expr) {
      if ('accept' in e || 'drop' in e) {
        s.verdict = 'accept' in e ? 'accept' : 'drop';
        continue;
      }
      const m = e.match as { op: string; left: Record<string, Record<string, string>>; right: unknown } | undefined;
      if (!m) return null;
      const { left, right, op } = m;
      const ctSaddr = left.ct?.dir === 'original' ? /^(ip6?) saddr$/.exec(left.ct.key ?? '')?.[1] : undefined;
      const payloadSaddr = left.payload?.field === 'saddr' ? left.payload.protocol : undefined;
      const family = ctSaddr ?? payloadSaddr;
      if (family === 'ip' || family === 'ip6') {
        if (op !== '==' && op !== '!=') return null;
        const prefix = (right as { prefix?: { addr?: unknown; len?: unknown } } | null)?.prefix;
        const text =
          typeof right === 'string'
            ? right
            : prefix && Object.keys(right as object).length === 1
              ? `${String(prefix.addr)}/${String(prefix.len)}`
              : JSON.stringify(right);
        const cidrs = memoCanonical(`${family}:${text}`, () => {
          const ranges = toRanges(right, family);
          return ranges ? canonical(ranges) : [];
        });
        if (cidrs.length === 0) return null;
        Object.assign(s, { nf: family, cidrs, negate: op === '!=' });
      } else if (left.meta?.key === 'nfproto' && op === '==') {
        s.nf = right === 'ipv4' ? 'ip' : right === 'ipv6' ? 'ip6' : undefined;
      } else if (left.payload?.field === 'dport' && op === '==' && typeof right === 'number') {
        Object.assign(s, { match: 'dport', protocol: left.payload.protocol, port: right });
      } else if (left.meta?.key === 'l4proto' && op === '==') {
        s.protocol = right as Protocol;
      } else if (left.ct?.key === 'proto-dst' && left.ct.dir === 'original' && typeof right === 'number') {
        Object.assign(s, { match: 'ct', port: right });
      } else if (left.ct?.key === 'state' && !left.ct.dir && op === '!=' && right === 'invalid') {
        s.valid = true;
      } else {
        return null;
      }
    }
  } catch {
    return null;
  }
  const ok = s.nf && s.verdict && s.match && (s.protocol === 'tcp' || s.protocol === 'udp') && typeof s.port === 'number';
  return ok ? (s as Shape) : null;
}
