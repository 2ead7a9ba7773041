/**
 * Converging a node is one act, previewed (docs/adr/0002-adopt-before-converge.md). The flip takes every module not yet taken,
 * loads the mesh's derived filter, then retires the found firewall by disabling it — in that
 * order, so at no step is the machine less protected than before. Returning to adopted
 * re-enables the retired firewall first, then unloads the derived filter.
 */
import type { Door, FirewallDriver, HostStateStore, Reach, RetiredState } from '../contract/providers.js';
import { MeshpError, oneLine } from '../errors.js';
import { providerMissing } from '../conditions.js';
import type { Host } from '../host/host.js';
import type { Declaration, Opening } from '../contract/model.js';
import { Reconciler, RETIRED_KEY, type ReconcileResult } from '../reconcile/reconciler.js';
import { planOpenings } from '../reconcile/openings.js';
import { validateDeclaration } from '../schema/validate.js';
import { buildPreview, pluginOpeningsOf, previewDoors, type ConvergePreview } from './preview.js';
import { pluginChangesOf } from './preview-changes.js';
import type { PlannedChange } from '../contract/transport.js';

export const MODE_KEY = 'node.mode';

export interface RetiredRecord {
  kind: string;
  at: string;
  state: RetiredState;
}

export type Progress = (step: string) => void;

export const NO_FILTER = 'MESHP_PROVIDER_MISSING';

/** Why a node without a firewall plugin is not converged: nothing would hold its derived filter, every port would stay open. */
export function noFilter(node: string): MeshpError {
  return new MeshpError(
    NO_FILTER,
    `node ${node} has no firewall plugin that can hold the derived filter (its agent runs --firewall none, or --firewall auto found no firewall in use: a kind is never guessed): converged, every port it serves would stay open to everyone; it stays adopted. Name the kind its agent loads the derived filter with (--firewall nftables, or iptables-nft) and preview again`,
  );
}

async function driverOf(host: Host): Promise<FirewallDriver> {
  const driver = await host.firewall();
  if (!driver) throw new MeshpError('MESHP_PROVIDER_MISSING', 'no firewall plugin is loaded: the derived filter has nowhere to go');
  return driver;
}

/** What converging this node would do, from what the machine has now. Changes nothing. */
export async function previewConverge(host: Host, input: unknown): Promise<ConvergePreview> {
  const decl = validateDeclaration(input);
  const facts = await host.facts();
  if (!facts) throw providerMissing('the machine facts (listening sockets) a preview needs');
  const runtime = await host.runtime();
  const driver = await driverOf(host);
  const [listening, published, firewall] = await Promise.all([
    facts.listening(),
    runtime ? runtime.publishedPorts().catch(() => []) : Promise.resolve([]),
    driver.describe(),
  ]);
  const reach = await reachOf(driver, previewDoors(listening, published));
  const { openings: pluginOpenings, changes: pluginChanges } = await pluginPlanOfNode(host, decl);
  return buildPreview({ declaration: decl, listening, published, firewall, pluginOpenings, pluginChanges, ...(reach ? { reach } : {}) });
}

/**
 * The openings this node's plugins add to its converged plan (the tunnel's port on a member): the
 * derived filter holds them, so a port a plugin opens on every node is not previewed as closing. The
 * agent reports them, and the controller's preview counts them the same way (`buildPreview`).
 */
export async function pluginOpeningsOfNode(host: Host, input: unknown): Promise<Opening[]> {
  return (await pluginPlanOfNode(host, input)).openings;
}

/** The openings and the other changes (a resolv.conf to write: preview-changes.ts) this node's plugins add to its converged plan. */
export async function pluginPlanOfNode(host: Host, input: unknown): Promise<{ openings: Opening[]; changes: PlannedChange[] }> {
  const decl = validateDeclaration(input);
  const plan = await new Reconciler(host).plan(convergedOf(decl), { preview: true });
  return { openings: pluginOpeningsOf(decl, plan.firewall.openings), changes: pluginChangesOf(plan) };
}

/** The declaration as it is once converged: every module taken. */
function convergedOf(adopted: Declaration): Declaration {
  return { ...adopted, mode: 'converged', modules: adopted.modules.map((m) => ({ ...m, taken: true })) };
}

/** The driver's answer for each door; null when it cannot say (the preview then says `unknown`). */
export async function reachOf(driver: FirewallDriver | null, doors: Door[]): Promise<Reach[] | null> {
  if (!driver?.reachability) return null;
  return driver.reachability(doors);
}

export interface FlipResult {
  preview: ConvergePreview;
  result: ReconcileResult;
  retired: RetiredRecord | null;
}

export async function flip(host: Host, input: unknown, previewId: string | undefined, progress: Progress = () => {}): Promise<FlipResult> {
  const store = await host.state();
  if (await store.getValue<RetiredRecord>(RETIRED_KEY)) {
    throw new MeshpError('MESHP_LIFECYCLE', 'this node is already converged: its found firewall was retired');
  }
  const preview = await previewConverge(host, input);
  if (previewId !== undefined && previewId !== preview.id) {
    throw new MeshpError('MESHP_PREVIEW_STALE', `the machine changed since preview ${previewId} (now ${preview.id}): preview again`);
  }
  const converged = convergedOf(validateDeclaration(input));
  const driver = await driverOf(host);

  progress(`taking ${preview.take.length ? preview.take.join(', ') : 'no module (all taken)'}`);
  const result = await new Reconciler(host).reconcile(converged);

  const declared = planOpenings(converged, new Set(), null, null);
  // Plugins' own openings (the tunnel's port, through the `plan` hook) go into the derived filter at the flip, not a reconcile later.
  const ids = new Set(declared.openings.map((o) => o.id));
  const openings = [...declared.openings, ...result.plan.firewall.openings.filter((o) => !ids.has(o.id))];
  const { refusals } = declared;
  progress(`loading the derived filter (${openings.length} openings, ${refusals.length} refusals)`);
  await driver.loadDerived({ openings, refusals, privateRange: converged.settings.privateRange });

  let retired: RetiredRecord | null = null;
  if (preview.firewall.active) {
    progress(`retiring the found ${driver.kind} firewall (disabled, its configuration kept)`);
    try {
      retired = { kind: driver.kind, at: new Date().toISOString(), state: await driver.retire() };
    } catch (e) {
      // Not retired: the node stays adopted, so the derived filter goes again and nothing closes.
      progress('retiring failed: unloading the derived filter again');
      await driver.unloadDerived();
      throw e;
    }
  } else {
    retired = { kind: driver.kind, at: new Date().toISOString(), state: {} };
  }
  await recordRetired(store, driver, retired, preview.firewall.active, progress);
  await store.setValue(MODE_KEY, 'converged');
  // The derived filter holds every opening and refusal now: what the mesh wrote while adopted (its
  // marked rules, its own table of refusals) goes, so no stale refusal outlives the flip. The node
  // is converged already; a failure here is reported, and the rules stay until the next flip back.
  try {
    await driver.ensure([], []);
    progress("removed the adopted node's marked rules: the derived filter holds them now");
  } catch (e) {
    progress(`the adopted node's marked rules could not be removed (${oneLine(e)}); the derived filter holds every opening and refusal anyway`);
  }
  progress('converged');
  return { preview, result, retired };
}

/**
 * The retirement recorded, or undone: without its record the return could not re-enable what was
 * retired (a full disk refuses the write), so the found firewall is re-enabled from the state in
 * hand, the derived filter unloaded, and the node stays adopted, as when the retire itself fails.
 */
async function recordRetired(store: HostStateStore, driver: FirewallDriver, retired: RetiredRecord, wasActive: boolean, progress: Progress): Promise<void> {
  try {
    await store.setValue(RETIRED_KEY, retired);
  } catch (e) {
    progress(`the retirement could not be recorded (${oneLine(e)}): re-enabling the found ${driver.kind} firewall and unloading the derived filter`);
    if (wasActive) await driver.reenable(retired.state);
    await driver.unloadDerived();
    throw e;
  }
}

/** Back to adopted: the retired firewall re-enabled, the derived filter unloaded, the node adopted again. */
export async function returnToAdopted(host: Host, input: unknown, progress: Progress = () => {}): Promise<ReconcileResult> {
  const adopted = validateDeclaration(input);
  const decl: Declaration = { ...adopted, mode: 'adopted' };
  await restoreFound(host, progress);
  progress('reconciling as adopted');
  return new Reconciler(host).reconcile(decl);
}

/**
 * The firewall half of the return (also a leaving node's, core/src/agent/leave.ts): the retired
 * found firewall re-enabled from its configuration first, then the derived filter unloaded, so at no
 * step is the machine less protected than converged; the node's mode is adopted after.
 */
export async function restoreFound(host: Host, progress: Progress = () => {}): Promise<void> {
  const store = await host.state();
  const retired = await store.getValue<RetiredRecord>(RETIRED_KEY);
  const driver = await driverOf(host);
  if (retired && retired.kind !== driver.kind && retired.kind !== 'none') {
    throw new MeshpError(
      'MESHP_FIREWALL_UNKNOWN',
      `the retired firewall was ${retired.kind} but ${driver.kind} answered now: name it with --firewall ${retired.kind}`,
    );
  }
  if (retired) {
    progress(`re-enabling the found ${retired.kind} firewall from its configuration`);
    await driver.reenable(retired.state);
  }
  progress('unloading the derived filter');
  await driver.unloadDerived();
  await store.setValue(RETIRED_KEY, null);
  await store.setValue(MODE_KEY, 'adopted');
}
