/**
 * declaration + what the machine has + the host's records → plan → guard → apply → report.
 * Core touches the machine only through the plugins the host was given.
 */
import type { FirewallDriver, HostStateStore } from '../contract/providers.js';
import type { Action, ApplyContext, HostReport, Plan } from '../contract/plan.js';
import { MeshpError, isMeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import { resourceKey, type Declaration, type ResourceKind } from '../contract/model.js';
import { applyPlan } from './apply-plan.js';
import type { Failure, InternalContext } from './context.js';
import { guard, type GuardContext } from './guard.js';
import { containerHandler, fileHandler, missingProvider, type ContentKind, type Handlers, type ResourceHandler } from './handlers.js';
import { planOpenings } from './openings.js';
import { buildReport } from './report.js';
import { decide, decideUndeclared, type Declared, type Records, type Seen } from './rule.js';
import { validateDeclaration } from '../schema/validate.js';

export { RETIRED_KEY } from './context.js';

export interface ReconcileOptions {
  preview?: boolean;
  now?: () => Date;
}

export interface ReconcileResult {
  plan: Plan;
  report: HostReport;
  /** Actions that failed while applying (the report marks them refused). */
  failures: Failure[];
}

export async function loadRecords(store: HostStateStore): Promise<Records> {
  const [owned, originals, intents] = await Promise.all([store.listOwned(), store.listOriginals(), store.listIntents()]);
  return {
    owned: new Map(owned.map((r) => [r.key, r])),
    originals: new Map(originals.map((r) => [r.key, r])),
    intents: new Map(intents.map((r) => [r.key, r])),
  };
}

export async function handlersOf(host: Host): Promise<Handlers> {
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
        key: resourceKey(kind, id),
        kind,
        id,
        module,
        taken,
        spec,
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

/** Every declared resource decided against what is there, and every recorded one no longer declared. */
function decideResources(decl: Declaration, declared: Declared[], seen: Map<string, Seen>, records: Records): Action[] {
  const actions: Action[] = declared.map((d) => decide(d, seen.get(d.key) ?? null, decl.mode, records));
  const declaredKeys = new Set(declared.map((d) => d.key));
  const recorded = new Map<string, { kind: ResourceKind; module: string }>();
  for (const r of [...records.originals.values(), ...records.owned.values()]) recorded.set(r.key, { kind: r.kind, module: r.module });
  for (const [key, r] of recorded) {
    if (!declaredKeys.has(key) && r.kind !== 'opening') actions.push(decideUndeclared(key, r.kind, r.module, records));
  }
  return actions;
}

/** The firewall found on the machine, the openings of ours it holds, or why it cannot be asked. */
async function findFirewall(
  host: Host,
  decl: Declaration,
): Promise<{ driver: FirewallDriver | null; present: Set<string> | null; firewallError: string | null }> {
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
  return { driver, present, firewallError };
}

/** The guarded plan, and what the apply and the report need of what was read to make it. */
async function prepare(host: Host, input: unknown, options: ReconcileOptions): Promise<{ plan: Plan; context: InternalContext }> {
  const decl = validateDeclaration(input);
  const store = await host.state();
  const handlers = await handlersOf(host);
  const records = await loadRecords(store);
  const declared = declaredResources(decl, handlers);
  const seen = await observe(declared, handlers);
  const actions = decideResources(decl, declared, seen, records);

  // Openings, through the firewall found on the machine.
  const holding = new Set(actions.filter((a) => a.state === 'held' || a.state === 'changed').map((a) => a.module));
  const { driver, present, firewallError } = await findFirewall(host, decl);
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

export class Reconciler {
  constructor(private readonly host: Host) {}

  /** The guarded plan for a declaration (after the plugins' `plan` hook), nothing applied. */
  async plan(input: unknown, options: ReconcileOptions = {}): Promise<Plan> {
    return (await prepare(this.host, input, options)).plan;
  }

  async reconcile(input: unknown, options: ReconcileOptions = {}): Promise<ReconcileResult> {
    const now = options.now ?? (() => new Date());
    const { plan, context } = await prepare(this.host, input, options);
    const failures: Failure[] = [];
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
