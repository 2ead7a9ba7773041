/**
 * Applying a guarded plan: the originals of everything found first, then one step per action's op,
 * then the firewall's openings as one set. A step that fails is noted and the others go on; a
 * record the store could not write (a full disk, a damaged file) ends the apply there instead:
 * nothing after it touches the machine, since no later write could be recorded first either.
 */
import type { Action, ActionOp, Plan } from '../contract/plan.js';
import type { ResourceKind } from '../contract/model.js';
import { oneLine } from '../errors.js';
import { RETIRED_KEY, type Failure, type InternalContext } from './context.js';
import { missingProvider, type ContentKind, type Handlers } from './handlers.js';
import type { Declared } from './rule.js';
import { verifyOpenings } from './verify.js';

/** One content action with what its step needs: its declared resource (none once undeclared) and its kind's handler. */
interface Step {
  a: Action;
  d: Declared | undefined;
  h: Handlers[ContentKind];
  ctx: InternalContext;
  at: () => string;
}

type Fail = (a: Action, e: unknown) => void;

/** What the host's store refused while recording a step: the apply stops (applyContent). */
class RecordRefused {
  constructor(readonly error: unknown) {}
}

/** A store write of a step; its failure is the whole apply's, not the action's. */
async function record(write: Promise<void>): Promise<void> {
  try {
    await write;
  } catch (e) {
    throw new RecordRefused(e);
  }
}

function idOf(key: string): { kind: ResourceKind; id: string } {
  const i = key.indexOf(':');
  return { kind: key.slice(0, i) as ResourceKind, id: key.slice(i + 1) };
}

/** The opening id of an opening action (its key is `opening:<id>`). */
function openingIdOf(a: Action): string {
  return a.key.slice(a.key.indexOf(':') + 1);
}

/** create / converge: the intent is recorded before the write, the ownership after it. */
async function write({ a, d, h, ctx, at }: Step): Promise<void> {
  if (!d || !h) throw missingProvider(a.kind as ContentKind);
  // What the plan saw: the write is refused if the target is no longer that file.
  const s = ctx.seen.get(a.key);
  const expect = s === null ? null : s && !(s instanceof Error) && s.identity ? s.identity : undefined;
  await record(ctx.store.recordIntent({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at() }));
  const identity = await h.write(d.spec as never, { node: ctx.decl.node, module: a.module, digest: d.desired, ...(expect === undefined ? {} : { expect }) });
  // Made where nothing was, or found (its original recorded first): what untake may do with it (issue 29).
  const made = ctx.records.owned.get(a.key)?.made ?? (ctx.records.originals.has(a.key) || a.found === true ? false : s === null);
  await record(ctx.store.recordOwned({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at(), identity: identity ?? null, made }));
}

/** keep: nothing is written; the records follow what is there. */
async function keep({ a, d, ctx, at }: Step): Promise<void> {
  const s = ctx.seen.get(a.key);
  const identity = s && !(s instanceof Error) ? (s.identity ?? null) : null;
  const owned = ctx.records.owned.get(a.key);
  if (a.state === 'owned' && d && !owned) {
    // Kept as the host's own: found as declared (its original recorded), or an interrupted write of ours recovered.
    const made = !(ctx.records.originals.has(a.key) || a.found === true);
    await record(ctx.store.recordOwned({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at(), identity, made }));
  } else if (a.state === 'owned' && owned && identity && owned.identity !== identity) {
    // Same content, another inode (an editor saves anew): the record follows the file.
    await record(ctx.store.recordOwned({ ...owned, identity }));
  } else if (a.state === 'changed') {
    await record(ctx.store.noteSeen(a.key, null, at()));
  }
}

/** hold: left as it is; what was seen is noted, to tell a later change by something else. */
async function hold({ a, ctx, at }: Step): Promise<void> {
  const s = ctx.seen.get(a.key);
  if (s && !(s instanceof Error)) await record(ctx.store.noteSeen(a.key, s.fingerprint, at(), s.identity));
}

/** remove: the host's own, no longer declared. */
async function remove({ a, h, ctx }: Step): Promise<void> {
  if (!h) throw missingProvider(a.kind as ContentKind);
  // The store unlinks the entry and refuses one that is no longer a regular file (a symlink
  // put there is refused, its target never reached). The recorded identity is not required
  // to match: a node restored from a copy has the same files under new inodes.
  await h.remove(idOf(a.key).id);
  await record(ctx.store.forgetOwned(a.key));
}

/** release / refuse: nothing on the machine changes. */
async function leaveInPlace(): Promise<void> {}

const STEPS: Record<ActionOp, (step: Step) => Promise<void>> = {
  create: write,
  converge: write,
  keep,
  hold,
  remove,
  release: leaveInPlace,
  refuse: leaveInPlace,
};

/** Originals of everything found, committed before anything else touches any resource. */
async function recordOriginals(plan: Plan, ctx: InternalContext, at: () => string): Promise<void> {
  for (const a of plan.actions) {
    if (!a.found) continue;
    const s = ctx.seen.get(a.key);
    if (!s || s instanceof Error) continue;
    await ctx.store.recordOriginal({
      key: a.key,
      kind: a.kind,
      module: a.module,
      original: await s.original(),
      fingerprint: s.fingerprint,
      foundAt: at(),
      lastFingerprint: s.fingerprint,
      changedAt: null,
      identity: s.identity ?? null,
      meta: s.meta ?? null,
    });
    // Only once the original is recorded: what it needs to be put back is kept (a container's image, by a tag of the mesh's).
    if (s.keep) await s.keep().catch(() => undefined);
  }
}

/** Files and containers, one step per action; an action a plugin added runs itself. */
async function applyContent(plan: Plan, ctx: InternalContext, at: () => string, fail: Fail): Promise<void> {
  const declaredByKey = new Map(ctx.declared.map((d) => [d.key, d]));
  for (const a of plan.actions) {
    if (a.kind === 'opening') continue;
    const step: Step = { a, d: declaredByKey.get(a.key), h: ctx.handlers[a.kind as ContentKind], ctx, at };
    try {
      if (a.run) await a.run();
      else await STEPS[a.op](step);
    } catch (e) {
      if (e instanceof RecordRefused) throw e.error;
      fail(a, e);
    }
  }
}

/** Openings: the whole wanted set, every reconcile; a firewall with nothing of ours is not touched. */
async function applyOpenings(plan: Plan, ctx: InternalContext, fail: Fail): Promise<void> {
  const { driver, store, decl } = ctx;
  if (!driver) return;
  const { openings, refusals } = plan.firewall;
  // A router's forwarded paths (issue 26, ADR 0038): asked for with the openings, in the same call.
  const forwards = plan.firewall.forwards ?? [];
  const derived = decl.mode === 'converged' && (await store.getValue(RETIRED_KEY)) !== null;
  // A converged node's derived filter is asked for every time (a reboot loses it; the drivers
  // leave alone one that stands as they loaded it); a found firewall holding nothing of the
  // mesh, with nothing wanted, is not touched at all.
  if (!derived && openings.length + refusals.length + forwards.length === 0 && ctx.present.size === 0) return;
  try {
    let refused: { id: string; reason: string }[] = [];
    if (derived) await driver.loadDerived({ openings, refusals, privateRange: decl.settings.privateRange, ...(forwards.length ? { forwards } : {}) });
    else refused = (await driver.ensure(openings, refusals, forwards)).refused ?? [];
    // Nothing is reported created (or owned) that the driver's walk has not seen open.
    const placed = new Set(refused.map((r) => r.id));
    const verdicts = await verifyOpenings(
      driver,
      openings.filter((o) => !placed.has(o.id)),
    );
    for (const r of refused) verdicts.set(r.id, { state: 'refused', reason: r.reason });
    for (const a of plan.actions) {
      const v = a.kind === 'opening' && a.op !== 'refuse' && a.state !== 'pending' ? verdicts.get(openingIdOf(a)) : undefined;
      if (v) ctx.verdicts.set(a.key, v);
    }
  } catch (e) {
    ctx.firewallError = oneLine(e);
    for (const a of plan.actions) if (a.kind === 'opening' && a.op !== 'refuse' && a.state !== 'pending') fail(a, e);
  }
}

export async function applyPlan(plan: Plan, ctx: InternalContext, now: () => Date, failures: Failure[]): Promise<void> {
  const at = () => now().toISOString();
  const fail: Fail = (a, e) => {
    failures.push({ key: a.key, error: oneLine(e) });
  };
  await recordOriginals(plan, ctx, at);
  await applyContent(plan, ctx, at, fail);
  await applyOpenings(plan, ctx, fail);
}
