/**
 * The agent's side of the node lifecycle (docs/adr/0002-adopt-before-converge.md). A converged declaration on a machine whose
 * found firewall is not yet retired is a flip: core's `flip`, to the preview id the controller
 * recorded (the flip re-checks it against the machine and refuses when it changed). A converged
 * declaration without a preview id flips only a machine with nothing to close — a converged
 * enrolment must never close a machine in use. An adopted declaration on a retired machine is a
 * return: core's `returnToAdopted`. Anything refused leaves the machine adopted, and says why.
 */
import { MeshpError, isMeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import type { Declaration } from '../contract/model.js';
import { declarationFromWire } from '../delta/declaration.js';
import type { WireDeclaration } from '../contract/wire.js';
import { NO_FILTER, flip, noFilter, previewConverge, returnToAdopted } from '../lifecycle/flip.js';
import { closingDoors } from '../lifecycle/preview.js';
import { Reconciler, RETIRED_KEY, type ReconcileResult } from '../reconcile/reconciler.js';
import type { LifecycleReport, UntakeOutcomeReport, UntakePreviewReport } from '../contract/transport.js';
import { releasePreviews, untakePreviews, untakesAsked } from './untake.js';

/** The last lifecycle outcome, kept in the host store so a restart reports (and remembers) it. */
export const LIFECYCLE_KEY = 'agent.lifecycle';

export interface LifecycleOutcome {
  result: ReconcileResult;
  lifecycle: LifecycleReport;
  /** On an adopted node (issue 29): the untakes asked and each taken module's untake preview (agent/untake.ts). */
  untake?: { outcomes: UntakeOutcomeReport[]; previews: UntakePreviewReport[]; releases: UntakePreviewReport[] };
}

/** Called with the lifecycle at every step, so the operator sees the flip as it runs. */
export type LifecycleStep = (l: LifecycleReport) => void;

const now = () => new Date().toISOString();

function refusal(e: unknown): { code: string; message: string } {
  return isMeshpError(e) ? { code: e.code, message: e.message } : { code: 'MESHP_PLUGIN_FAILED', message: oneLine(e) };
}

/** Reconciles the declaration that arrived, running a flip or a return when the mode asks for one. */
export async function reconcileLifecycle(host: Host, wire: WireDeclaration, onStep: LifecycleStep = () => {}): Promise<LifecycleOutcome> {
  const decl = declarationFromWire(wire);
  const store = await host.state();
  const retired = await store.getValue(RETIRED_KEY);
  const stored = await store.getValue<LifecycleReport>(LIFECYCLE_KEY);
  const save = async (l: LifecycleReport) => {
    await store.setValue(LIFECYCLE_KEY, l);
    return l;
  };
  const reconcile = (d: Declaration) => new Reconciler(host).reconcile(d);

  if (decl.mode === 'adopted') {
    if (!retired) {
      const lifecycle = stored?.state === 'adopted' ? stored : await save({ state: 'adopted', previewId: '', steps: [], at: now() });
      const asked = await untakesAsked(host, decl, wire);
      const result = await reconcile(asked.decl);
      const untake = { outcomes: asked.outcomes, previews: await untakePreviews(host, asked.decl), releases: await releasePreviews(host, asked.decl) };
      return { result, lifecycle, untake };
    }
    return returning(host, decl, onStep, save);
  }

  if (retired) {
    const lifecycle =
      stored?.state === 'converged' ? stored : await save({ state: 'converged', previewId: wire.convergePreviewId ?? '', steps: [], at: now() });
    return { result: await reconcile(decl), lifecycle };
  }
  let hasDriver: boolean;
  try {
    const driver = await host.firewall();
    hasDriver = driver !== null && driver.kind !== 'none';
  } catch (e) {
    return refused(decl, wire, e, [], reconcile, save, onStep);
  }
  const recorded = wire.convergePreviewId || '';
  if (stored?.state === 'refused' && stored.previewId === recorded && (stored.code === 'MESHP_PREVIEW_STALE' || (!hasDriver && stored.code === NO_FILTER))) {
    // Refused for this preview already (the machine changed since, or it has no firewall to flip): a new preview and flip are needed.
    return { result: await reconcile({ ...decl, mode: 'adopted' }), lifecycle: stored };
  }
  if (!hasDriver) {
    // Converged means the derived filter is loaded: a machine no firewall plugin can hold it on stays adopted, and says why.
    return refused(decl, wire, noFilter(decl.node), [], reconcile, save, onStep);
  }
  return flipping(host, decl, wire, recorded, reconcile, save, onStep);
}

async function flipping(
  host: Host,
  decl: Declaration,
  wire: WireDeclaration,
  recorded: string,
  reconcile: (d: Declaration) => Promise<ReconcileResult>,
  save: (l: LifecycleReport) => Promise<LifecycleReport>,
  onStep: LifecycleStep,
): Promise<LifecycleOutcome> {
  const steps: string[] = [];
  try {
    let previewId = recorded;
    if (!previewId) {
      const p = await previewConverge(host, decl);
      const closes = closingDoors(p.items);
      if (p.firewall.active || closes.length > 0) {
        const found = [
          ...(p.firewall.active ? [`an active ${p.firewall.kind} firewall`] : []),
          ...(closes.length ? [`${closes.map((i) => `${i.port}/${i.protocol} (${i.holder})`).join(', ')} would close`] : []),
        ];
        throw new MeshpError(
          'MESHP_MACHINE_IN_USE',
          `converged without a preview on a machine in use (${found.join('; ')}): nothing flipped. To keep it serving as it is: meshp node adopt ${decl.node} --yes (or enrol with a token made with --adopted); to converge it: meshp node converge ${decl.node} --preview, then --yes --preview-id ID`,
        );
      }
      previewId = p.id;
    }
    let lifecycle: LifecycleReport = { state: 'flipping', previewId, steps, at: now() };
    onStep(lifecycle);
    const done = await flip(host, decl, previewId, (step) => {
      steps.push(step);
      lifecycle = { ...lifecycle, steps: [...steps], at: now() };
      onStep(lifecycle);
    });
    lifecycle = await save({ state: 'converged', previewId, steps: [...steps], at: now() });
    onStep(lifecycle);
    return { result: done.result, lifecycle };
  } catch (e) {
    if (steps.some((s) => s.startsWith('loading the derived filter'))) {
      // Half a flip: the derived filter goes again, so the found firewall alone is in force as before.
      try {
        await (await host.firewall())?.unloadDerived();
        steps.push('the flip failed: the derived filter unloaded again');
      } catch (u) {
        steps.push(`the flip failed and the derived filter could not be unloaded: ${oneLine(u)}`);
      }
    }
    return refused(decl, wire, e, steps, reconcile, save, onStep);
  }
}

async function refused(
  decl: Declaration,
  wire: WireDeclaration,
  e: unknown,
  steps: string[],
  reconcile: (d: Declaration) => Promise<ReconcileResult>,
  save: (l: LifecycleReport) => Promise<LifecycleReport>,
  onStep: LifecycleStep,
): Promise<LifecycleOutcome> {
  const lifecycle = await save({ state: 'refused', previewId: wire.convergePreviewId ?? '', steps, ...refusal(e), at: now() });
  onStep(lifecycle);
  // Nothing flipped: the machine stays as adopted, its found firewall and what it holds kept.
  return { result: await reconcile({ ...decl, mode: 'adopted' }), lifecycle };
}

async function returning(
  host: Host,
  decl: Declaration,
  onStep: LifecycleStep,
  save: (l: LifecycleReport) => Promise<LifecycleReport>,
): Promise<LifecycleOutcome> {
  const steps: string[] = [];
  let lifecycle: LifecycleReport = { state: 'returning', previewId: '', steps, at: now() };
  onStep(lifecycle);
  try {
    const result = await returnToAdopted(host, decl, (step) => {
      steps.push(step);
      lifecycle = { ...lifecycle, steps: [...steps], at: now() };
      onStep(lifecycle);
    });
    lifecycle = await save({ state: 'adopted', previewId: '', steps: [...steps], at: now() });
    onStep(lifecycle);
    return { result, lifecycle };
  } catch (e) {
    lifecycle = await save({ state: 'refused', previewId: '', steps: [...steps], ...refusal(e), at: now() });
    onStep(lifecycle);
    throw e;
  }
}
