/**
 * After `ensure`, the driver's reach walk is asked about every opening the reconcile wrote or
 * kept: an opening is reported created (or owned) only when the walk sees it open from its whole
 * range, less the sources the found firewall denies in part above it (its bans and blocklists,
 * which the opening respects by design). One the walk sees closed from more is refused, naming the
 * rule that shadows it; one whose path holds a match the walk cannot read, or a driver without a walk, is unverified
 * — written and not proven: one the driver wrote nothing for and the walk cannot prove open is refused.
 */
import type { Door, FirewallDriver, Reach } from '../contract/providers.js';
import { MeshpError } from '../errors.js';
import type { Opening, ResourceState } from '../contract/model.js';
import { cidrSpan, intersect, isEmpty, spansToSet, subtract, wholeOf, type AddressSet } from '../net/spans.js';

export interface Verdict {
  state: Extract<ResourceState, 'refused' | 'unverified'>;
  reason: string;
}

function setOf(cidrs: readonly string[]): AddressSet {
  return spansToSet(cidrs.map(cidrSpan));
}

/** The sources an opening must be open from: its `from`, or everywhere. */
function rangeOf(o: Opening): AddressSet {
  return o.from.length ? setOf(o.from) : wholeOf([4, 6]);
}

function allowedOf(r: Reach): AddressSet {
  if (r.now === 'open') return wholeOf([4, 6]);
  if (r.now === 'open-from') return setOf(r.from ?? []);
  return setOf([]);
}

/** The rules of `hits` that concern some of the range. */
function touching(hits: Reach['droppedBy'], range: AddressSet): string[] {
  return [...new Set((hits ?? []).filter((h) => !isEmpty(intersect(range, setOf(h.from)))).map((h) => h.rule))];
}

/** What the walk says of each accepting opening: absent from the map when it is open from its whole range and readable. */
export async function verifyOpenings(driver: FirewallDriver, openings: readonly Opening[]): Promise<Map<string, Verdict>> {
  const out = new Map<string, Verdict>();
  const accepts = openings.filter((o) => o.action === 'accept');
  if (accepts.length === 0) return out;
  if (!driver.reachability) {
    const reason = new MeshpError('MESHP_OPENING_UNVERIFIED', `firewall ${driver.kind} has no reach walk: its openings are written but not verified`).oneLine();
    for (const o of accepts) out.set(o.id, { state: 'unverified', reason });
    return out;
  }
  const doors: Door[] = accepts.map((o) => ({ port: o.port, protocol: o.protocol, path: o.path }));
  const reach = await driver.reachability(doors, { explain: true });
  accepts.forEach((o, i) => {
    const r = reach[i];
    const range = rangeOf(o);
    // Sources a found rule denies in part (a ban, a blocklist) stay denied: the opening respects them.
    const respected = setOf((r?.droppedBy ?? []).filter((d) => d.partial).flatMap((d) => d.from));
    const missing = r ? subtract(subtract(range, allowedOf(r)), respected) : range;
    if (!r || !isEmpty(missing)) {
      const by = touching(
        r?.droppedBy?.filter((d) => !d.partial),
        missing,
      );
      const rule = by.length ? `shadowed by ${by.join('; ')}` : 'no rule the walk can name lets it through';
      out.set(o.id, {
        state: 'refused',
        reason: new MeshpError('MESHP_OPENING_INEFFECTIVE', `opening ${o.id} is written but not open from its whole range: ${rule}`).oneLine(),
      });
      return;
    }
    const unread = touching(r.unread, range);
    if (unread.length) {
      out.set(o.id, {
        state: 'unverified',
        reason: new MeshpError('MESHP_OPENING_UNVERIFIED', `opening ${o.id}: the walk cannot read ${unread.join('; ')}`).oneLine(),
      });
    }
  });
  return notWritten(driver, out);
}

/**
 * `unverified` means written and not proven. An opening the driver wrote nothing for (its
 * placement found no drop of all its traffic) that the walk cannot prove open is not an opening
 * at all: refused, with why — the found firewall's own ports were open there, the mesh's is not.
 */
async function notWritten(driver: FirewallDriver, out: Map<string, Verdict>): Promise<Map<string, Verdict>> {
  const unsure = [...out].filter(([, v]) => v.state === 'unverified');
  if (unsure.length === 0) return out;
  const written = new Set((await driver.openings()).map((o) => o.id));
  for (const [id, v] of unsure) {
    if (written.has(id)) continue;
    const why = v.reason.replace(/^MESHP_OPENING_UNVERIFIED: opening \S+: /, '');
    out.set(id, {
      state: 'refused',
      reason: new MeshpError(
        'MESHP_OPENING_UNPLACEABLE',
        `opening ${id} is not written: the placement found nothing that drops it, yet ${why}, so it is not proven open`,
      ).oneLine(),
    });
  }
  return out;
}
