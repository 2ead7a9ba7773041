/**
 * The agent's side of an untake asked through the controller (issue 29, docs/adr/0027). The declaration
 * names each module the operator untook with the preview id they saw (`untakes`), the module sent not
 * taken. The agent untakes it on the machine with that id (core's `untake`, which re-checks it against
 * the machine and changes nothing when it differs or something blocks it), once: the outcome is kept in
 * the host store by module and preview id, so a restart reports it and does not untake again. A refused
 * untake leaves the module taken on the machine, as it was, until the operator takes it again (which
 * ends the untake asked) or untakes it with a new preview. An untake killed half way is run again to its
 * end (its note, UNTAKE_KEY, says which preview it was). Each report of an adopted node carries each
 * taken module's untake preview, so the controller's preview is the machine's.
 */
import { isMeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import type { Declaration } from '../contract/model.js';
import type { UntakeOutcomeReport, UntakePreviewReport } from '../contract/transport.js';
import type { WireDeclaration } from '../contract/wire.js';
import { loadRecords } from '../reconcile/reconciler.js';
import { UNTAKE_KEY, untake } from '../reconcile/untake.js';
import { untakeStatus } from '../reconcile/untake-status.js';
import { releaseRestore } from '../reconcile/release.js';

/** The untakes the agent ended, by module: kept so a restart reports them and does not run them again. */
export const UNTAKES_KEY = 'agent.untakes';

export interface UntakesAsked {
  /** The declaration the machine is reconciled to: a module whose untake was refused stays taken. */
  decl: Declaration;
  /** The outcome of each untake the declaration asks. */
  outcomes: UntakeOutcomeReport[];
}

const withTaken = (d: Declaration, module: string, taken: boolean): Declaration => ({
  ...d,
  modules: d.modules.map((m) => (m.name === module ? { ...m, taken } : m)),
});

/** Runs the untakes the declaration asks that this agent has not ended yet; an adopted declaration only. */
export async function untakesAsked(host: Host, input: Declaration, wire: WireDeclaration, log: (msg: string) => void = () => {}): Promise<UntakesAsked> {
  const store = await host.state();
  const stored = (await store.getValue<Record<string, UntakeOutcomeReport>>(UNTAKES_KEY)) ?? {};
  const asked = new Map((wire.untakes ?? []).map((u) => [u.module, u.previewId]));
  const releases = new Map((wire.releases ?? []).map((u) => [u.module, u.previewId]));
  let decl = input;
  let dirty = false;
  // Taken again (or unassigned): the untake asked before is over; the same preview id later is a new untake.
  for (const module of Object.keys(stored)) {
    if (module.startsWith(RELEASE) ? !releases.has(module.slice(RELEASE.length)) : !asked.has(module)) {
      delete stored[module];
      dirty = true;
    }
  }
  const outcomes: UntakeOutcomeReport[] = [];
  for (const [module, previewId] of asked) {
    const m = decl.modules.find((x) => x.name === module);
    if (!m || m.taken) continue;
    let outcome = stored[module]?.previewId === previewId ? stored[module]! : null;
    if (!outcome) outcome = await untakeOne(host, decl, module, previewId, log);
    if (stored[module] !== outcome) {
      stored[module] = outcome;
      dirty = true;
    }
    if (outcome.result === 'refused') decl = withTaken(decl, module, true);
    outcomes.push(outcome);
  }
  // Released with --restore (no longer declared): each held file changed while held gets its original back, once.
  for (const [module, previewId] of releases) {
    if (decl.modules.some((x) => x.name === module)) continue;
    const key = `${RELEASE}${module}`;
    let outcome = stored[key]?.previewId === previewId ? stored[key]! : null;
    if (!outcome) outcome = await releaseOne(host, decl.node, module, previewId, log);
    if (stored[key] !== outcome) {
      stored[key] = outcome;
      dirty = true;
    }
    outcomes.push(outcome);
  }
  if (dirty) await store.setValue(UNTAKES_KEY, stored);
  return { decl, outcomes };
}

const RELEASE = 'release:';

async function releaseOne(host: Host, node: string, module: string, previewId: string, log: (msg: string) => void): Promise<UntakeOutcomeReport> {
  const at = () => new Date().toISOString();
  try {
    const plan = await releaseRestore(host, node, module, { previewId });
    const n = plan.steps.filter((s) => s.op === 'restore').length;
    log(`released ${module} with --restore (preview ${previewId}): ${n} held file(s) put back`);
    return { module, previewId, result: 'done', code: '', message: `${n} held file(s) that changed while held put back`, at: at(), release: true };
  } catch (e) {
    log(`release --restore of ${module} refused: ${oneLine(e)}`);
    const code = isMeshpError(e) ? e.code : 'MESHP_PLUGIN_FAILED';
    return { module, previewId, result: 'refused', code, message: isMeshpError(e) ? e.message : oneLine(e), at: at(), release: true };
  }
}

async function untakeOne(host: Host, decl: Declaration, module: string, previewId: string, log: (msg: string) => void): Promise<UntakeOutcomeReport> {
  const at = () => new Date().toISOString();
  const store = await host.state();
  const running = await store.getValue<{ module: string; id: string }>(UNTAKE_KEY);
  const resuming = running?.module === module && running.id === previewId;
  if (!resuming) {
    // Nothing of the take left to put back (an untake that ended before its outcome was kept): done.
    const status = untakeStatus(await loadRecords(store), running).find((s) => s.module === module);
    if (!status || (status.putBack.length === 0 && !status.interrupted)) {
      return { module, previewId, result: 'done', code: '', message: 'nothing the take changed is left to put back', at: at() };
    }
  }
  try {
    // Resuming a killed untake: the machine is half put back, so its plan is not the preview any more; it is run to its end.
    await untake(host, withTaken(decl, module, true), module, resuming ? {} : { previewId });
    log(`untook ${module} (preview ${previewId})`);
    return { module, previewId, result: 'done', code: '', message: resuming ? 'an interrupted untake completed' : '', at: at() };
  } catch (e) {
    log(`untake of ${module} refused: ${oneLine(e)}`);
    return {
      module,
      previewId,
      result: 'refused',
      code: isMeshpError(e) ? e.code : 'MESHP_PLUGIN_FAILED',
      message: isMeshpError(e) ? e.message : oneLine(e),
      at: at(),
    };
  }
}

/** Each taken module's untake preview on the machine now, for the report (a module whose preview fails is left out). */
export async function untakePreviews(host: Host, decl: Declaration, log: (msg: string) => void = () => {}): Promise<UntakePreviewReport[]> {
  const out: UntakePreviewReport[] = [];
  for (const m of decl.modules) {
    if (!m.taken) continue;
    try {
      const { plan } = await untake(host, decl, m.name, { preview: true });
      out.push({
        module: plan.module,
        id: plan.id,
        steps: plan.steps.map((s) => ({ key: s.key, kind: s.kind, op: s.op, what: s.what })),
        blocks: plan.blocks.map((b) => ({ key: b.key, code: b.code, reason: b.reason, diff: b.diff ?? '' })),
      });
    } catch (e) {
      log(`untake preview of ${m.name} failed: ${oneLine(e)}`);
    }
  }
  return out;
}

/** Each assigned, untaken module's release --restore preview now, for the report: only a module that holds files. */
export async function releasePreviews(host: Host, decl: Declaration, log: (msg: string) => void = () => {}): Promise<UntakePreviewReport[]> {
  const out: UntakePreviewReport[] = [];
  for (const m of decl.modules) {
    if (m.taken) continue;
    try {
      const plan = await releaseRestore(host, decl.node, m.name, { preview: true });
      if (plan.steps.length + plan.blocks.length === 0) continue;
      out.push({
        module: plan.module,
        id: plan.id,
        steps: plan.steps.map((x) => ({ key: x.key, kind: x.kind, op: x.op, what: x.what })),
        blocks: plan.blocks.map((b) => ({ key: b.key, code: b.code, reason: b.reason, diff: b.diff ?? '' })),
      });
    } catch (e) {
      log(`release preview of ${m.name} failed: ${oneLine(e)}`);
    }
  }
  return out;
}
