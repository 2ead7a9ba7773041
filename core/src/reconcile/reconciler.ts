/**
 * declaration + what the machine has + the host's records → plan → guard → apply → report.
 * Core touches the machine only through the plugins the host was given.
 */
import type { FirewallDriver, HostStateStore } from '../contract/providers.js';
import type { Action, ApplyContext, HostReport, Plan, ResourceReport } from '../contract/plan.js';
import { MeshpError, isMeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import { resourceKey, type Declaration, type ResourceKind, type ResourceState } from '../contract/model.js';
import { guard, type GuardContext } from './guard.js';
import { containerHandler, fileHandler, missingProvider, type ContentKind, type Handlers, type ResourceHandler } from './handlers.js';
import { planOpenings } from './openings.js';
import { verifyOpenings, type Verdict } from './verify.js';
import { decide, decideUndeclared, type Declared, type Records, type Seen } from './rule.js';
import { validateDeclaration } from './validate.js';

export const RETIRED_KEY = 'firewall.retired';

export interface ReconcileOptions {
  preview?: boolean;
  now?: () => Date;
}

export interface ReconcileResult {
  plan: Plan;
  report: HostReport;
  /** Actions that failed while applying (the report marks them refused). */
  failures: { key: string; error: string }[];
}

const STATES: ResourceState[] = ['created', 'owned', 'held', 'changed', 'released', 'pending', 'refused', 'unverified'];

async function loadRecords(store: HostStateStore): Promise<Records> {
  const [owned, originals, intents] = await Promise.all([store.listOwned(), store.listOriginals(), store.listIntents()]);
  return {
    owned: new Map(owned.map((r) => [r.key, r])),
    originals: new Map(originals.map((r) => [r.key, r])),
    intents: new Map(intents.map((r) => [r.key, r])),
  };
}

async function handlersOf(host: Host): Promise<Handlers> {
  const files = await host.files();
  const runtime = await host.runtime();
  return { file: files && fileHandler(files), container: runtime && containerHandler(runtime) };
}

function declaredResources(decl: Declaration, handlers: Handlers): Declared[] {
  const out: Declared[] = [];
  const add = <S>(kind: ContentKind, specs: S[] | undefined, module: string, taken: boolean) => {
    const h = handlers[kind] as ResourceHandler<S> | null;
    for (const spec of specs ?? []) {
      const id = h ? h.id(spec) : String((spec as { path?: string; name?: string }).path ?? (spec as { name?: string }).name);
      out.push({
        key: resourceKey(kind, id), kind, id, module, taken, spec,
        desired: h ? h.desiredDigest(spec) : '',
        createOnly: h?.createOnly?.(spec) ?? false,
      });
    }
  };
  for (const m of decl.modules) {
    add('file', m.files, m.name, m.taken);
    add('container', m.containers, m.name, m.taken);
  }
  return out;
}

function idOf(key: string): { kind: ResourceKind; id: string } {
  const i = key.indexOf(':');
  return { kind: key.slice(0, i) as ResourceKind, id: key.slice(i + 1) };
}

/** Reads everything first: a path that escapes the root refuses the whole apply before anything is written. */
async function observe(declared: Declared[], handlers: Handlers): Promise<Map<string, Seen>> {
  const seen = new Map<string, Seen>();
  for (const d of declared) {
    const h = handlers[d.kind as ContentKind];
    if (!h) {
      seen.set(d.key, missingProvider(d.kind as ContentKind));
      continue;
    }
    try {
      seen.set(d.key, await h.observe(d.id));
    } catch (e) {
      if (isMeshpError(e, 'MESHP_PATH_ESCAPES_ROOT') || isMeshpError(e, 'MESHP_PATH_INVALID')) throw e;
      seen.set(d.key, e instanceof Error ? e : new Error(String(e)));
    }
  }
  return seen;
}

export class Reconciler {
  constructor(private readonly host: Host) {}

  async plan(input: unknown, options: ReconcileOptions = {}): Promise<{ plan: Plan; context: InternalContext }> {
    const decl = validateDeclaration(input);
    const host = this.host;
    const store = await host.state();
    const handlers = await handlersOf(host);
    const records = await loadRecords(store);
    const declared = declaredResources(decl, handlers);
    const seen = await observe(declared, handlers);

    const actions: Action[] = declared.map((d) => decide(d, seen.get(d.key) ?? null, decl.mode, records));
    const declaredKeys = new Set(declared.map((d) => d.key));
    const recorded = new Map<string, { kind: ResourceKind; module: string }>();
    for (const r of [...records.originals.values(), ...records.owned.values()]) recorded.set(r.key, { kind: r.kind, module: r.module });
    for (const [key, r] of recorded) {
      if (!declaredKeys.has(key) && r.kind !== 'opening') actions.push(decideUndeclared(key, r.kind, r.module, records));
    }

    // Openings, through the firewall found on the machine.
    const holding = new Set(actions.filter((a) => a.state === 'held' || a.state === 'changed').map((a) => a.module));
    let driver: FirewallDriver | null = null;
    let firewallError: string | null = null;
    const wantsOpenings = decl.modules.some((m) => (m.openings ?? []).length > 0);
    try {
      driver = await host.firewall();
    } catch (e) {
      // An active firewall no plugin speaks: nothing is adopted with the mesh's ports unprotected.
      if (isMeshpError(e, 'MESHP_FIREWALL_UNKNOWN')) throw e;
      firewallError = oneLine(e);
    }
    if (!driver && wantsOpenings && firewallError === null) firewallError = oneLine(new MeshpError('MESHP_PROVIDER_MISSING', 'no firewall plugin is loaded'));
    let present: Set<string> | null = null;
    if (driver) {
      try {
        present = new Set((await driver.openings()).map((o) => o.id));
      } catch (e) {
        firewallError = oneLine(e);
      }
    }
    const op = planOpenings(decl, holding, present, firewallError);
    actions.push(...op.actions);

    let plan: Plan = {
      node: decl.node,
      mode: decl.mode,
      actions,
      firewall: { openings: op.openings, refusals: op.refusals, kind: driver?.kind ?? null },
    };
    const applyContext: ApplyContext = { declaration: decl, plan, preview: options.preview === true };
    plan = await host.call(host.hooks.plan, () => host.hooks.plan.promise(plan, applyContext));
    const taken = new Map(decl.modules.map((m) => [m.name, m.taken]));
    const guardContext: GuardContext = { mode: decl.mode, taken, records, seen };
    plan = guard(plan, guardContext);
    applyContext.plan = plan;
    return { plan, context: { decl, store, handlers, records, seen, driver, applyContext, declared, present: present ?? new Set(), verdicts: new Map() } };
  }

  async reconcile(input: unknown, options: ReconcileOptions = {}): Promise<ReconcileResult> {
    const now = options.now ?? (() => new Date());
    const { plan, context } = await this.plan(input, options);
    const failures: ReconcileResult['failures'] = [];
    if (!options.preview) {
      const veto = await this.host.call(this.host.hooks.beforeApply, () => this.host.hooks.beforeApply.promise(plan, context.applyContext));
      if (veto) throw new MeshpError('MESHP_VETOED', veto);
      await applyPlan(plan, context, now, failures);
    }
    let report = await buildReport(plan, context, now, failures);
    report = await this.host.call(this.host.hooks.report, () => this.host.hooks.report.promise(report));
    if (!options.preview) {
      await context.store.saveReport(report);
      await this.host.call(this.host.hooks.afterApply, () => this.host.hooks.afterApply.promise(report, context.applyContext));
    }
    return { plan, report, failures };
  }
}

interface InternalContext {
  decl: Declaration;
  store: HostStateStore;
  handlers: Handlers;
  records: Records;
  seen: Map<string, Seen>;
  driver: FirewallDriver | null;
  applyContext: ApplyContext;
  declared: Declared[];
  /** Ids of the openings carrying the mesh's mark that the firewall holds now. */
  present: Set<string>;
  /** Why the firewall refused this reconcile's openings, if it did. */
  firewallError?: string;
  /** Openings the driver refused or its walk did not see open (or could not read), by key. */
  verdicts: Map<string, Verdict>;
}

/** The opening id of an opening action (its key is `opening:<id>`). */
function openingIdOf(a: Action): string {
  return a.key.slice(a.key.indexOf(':') + 1);
}

async function applyPlan(plan: Plan, ctx: InternalContext, now: () => Date, failures: ReconcileResult['failures']): Promise<void> {
  const { store, handlers, seen, records, decl } = ctx;
  const at = () => now().toISOString();
  const declaredByKey = new Map(ctx.declared.map((d) => [d.key, d]));

  // 1. Originals of everything found, committed before anything else touches any resource.
  for (const a of plan.actions) {
    if (!a.found) continue;
    const s = seen.get(a.key);
    if (!s || s instanceof Error) continue;
    await store.recordOriginal({
      key: a.key, kind: a.kind, module: a.module,
      original: await s.original(), fingerprint: s.fingerprint,
      foundAt: at(), lastFingerprint: s.fingerprint, changedAt: null, identity: s.identity ?? null,
    });
  }

  const fail = (a: Action, e: unknown) => {
    failures.push({ key: a.key, error: oneLine(e) });
  };

  for (const a of plan.actions) {
    if (a.kind === 'opening') continue;
    const d = declaredByKey.get(a.key);
    const h = handlers[a.kind as ContentKind];
    try {
      if (a.run) {
        await a.run();
        continue;
      }
      switch (a.op) {
        case 'create':
        case 'converge': {
          if (!d || !h) throw missingProvider(a.kind as ContentKind);
          // What the plan saw: the write is refused if the target is no longer that file.
          const s = seen.get(a.key);
          const expect = s === null ? null : s && !(s instanceof Error) && s.identity ? s.identity : undefined;
          await store.recordIntent({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at() });
          const identity = await h.write(d.spec as never, { node: decl.node, module: a.module, digest: d.desired, ...(expect === undefined ? {} : { expect }) });
          await store.recordOwned({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at(), identity: identity ?? null });
          break;
        }
        case 'keep': {
          const s = seen.get(a.key);
          const identity = s && !(s instanceof Error) ? s.identity ?? null : null;
          const owned = records.owned.get(a.key);
          if (a.state === 'owned' && d && !owned) {
            await store.recordOwned({ key: a.key, kind: a.kind, module: a.module, digest: d.desired, at: at(), identity });
          } else if (a.state === 'owned' && owned && identity && owned.identity !== identity) {
            // Same content, another inode (an editor saves anew): the record follows the file.
            await store.recordOwned({ ...owned, identity });
          } else if (a.state === 'changed') {
            await store.noteSeen(a.key, null, at());
          }
          break;
        }
        case 'hold': {
          const s = seen.get(a.key);
          if (s && !(s instanceof Error)) await store.noteSeen(a.key, s.fingerprint, at(), s.identity);
          break;
        }
        case 'remove': {
          if (!h) throw missingProvider(a.kind as ContentKind);
          // The store unlinks the entry and refuses one that is no longer a regular file (a symlink
          // put there is refused, its target never reached). The recorded identity is not required
          // to match: a node restored from a copy has the same files under new inodes.
          await h.remove(idOf(a.key).id);
          await store.forgetOwned(a.key);
          break;
        }
        case 'release':
        case 'refuse':
          break;
      }
    } catch (e) {
      fail(a, e);
    }
  }

  // Openings: the whole wanted set, every reconcile; a firewall with nothing of ours is not touched.
  const driver = ctx.driver;
  if (driver) {
    const { openings, refusals } = plan.firewall;
    const derived = decl.mode === 'converged' && (await store.getValue(RETIRED_KEY)) !== null;
    // A converged node's derived filter is asked for every time (a reboot loses it; the drivers
    // leave alone one that stands as they loaded it); a found firewall holding nothing of the
    // mesh, with nothing wanted, is not touched at all.
    if (derived || openings.length + refusals.length > 0 || ctx.present.size > 0) {
      try {
        let refused: { id: string; reason: string }[] = [];
        if (derived) await driver.loadDerived({ openings, refusals, privateRange: decl.settings.privateRange });
        else refused = (await driver.ensure(openings, refusals)).refused ?? [];
        // Nothing is reported created (or owned) that the driver's walk has not seen open.
        const placed = new Set(refused.map((r) => r.id));
        const verdicts = await verifyOpenings(driver, openings.filter((o) => !placed.has(o.id)));
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
  }
}

async function buildReport(plan: Plan, ctx: InternalContext, now: () => Date, failures: ReconcileResult['failures']): Promise<HostReport> {
  const failed = new Map(failures.map((f) => [f.key, f.error]));
  const resources: ResourceReport[] = [];
  for (const a of plan.actions) {
    if (a.op === 'remove' && !failed.has(a.key)) continue;
    const error = failed.get(a.key);
    const verdict = error ? undefined : ctx.verdicts.get(a.key);
    resources.push({
      key: a.key, kind: a.kind, module: a.module,
      state: error ? 'refused' : verdict ? verdict.state : a.state,
      ...(error ? { reason: error } : verdict ? { reason: verdict.reason } : a.reason ? { reason: a.reason } : {}),
    });
  }
  const counts = Object.fromEntries(STATES.map((s) => [s, 0])) as Record<ResourceState, number>;
  for (const r of resources) counts[r.state] += 1;
  let firewall: HostReport['firewall'] = null;
  if (ctx.driver) {
    try {
      const d = await ctx.driver.describe();
      firewall = { kind: d.kind, active: d.active, summary: d.summary };
    } catch (e) {
      firewall = { kind: ctx.driver.kind, active: false, summary: [oneLine(e)] };
    }
  }
  const facts = ctx.firewallError ? { firewallError: ctx.firewallError } : {};
  return { node: plan.node, mode: plan.mode, at: now().toISOString(), firewall, resources, counts, facts };
}
