/**
 * A node leaving its network: what the mesh added to the machine goes, what it found stays. One
 * function for both ways out — the controller answered that the node was removed (the agent, on
 * MESHP_NODE_REVOKED), or the operator asked (`meshp agent leave`) — so both take away the same.
 *
 * 1. What plugins added outside the firewall driver, through the `leave` hook (the tunnel: its
 *    wireguard-go, its interface and addresses, its own nft table).
 * 2. The firewall. Converged, with a found firewall retired: the found firewall is re-enabled first,
 *    then the derived filter unloaded (`restoreFound`, the return's own order): the machine is as it
 *    was found, never less protected on the way. Converged where no firewall was found: the derived
 *    filter stays, said so — unloading it would open every port with nothing to say it; the machine
 *    is not left closed either (it lets in what it let in while converged). Then the mesh's marked
 *    rules (the driver's `ensure([], [])`): the found tables' own rules are never touched.
 * 3. The left mark in the state folder: an agent started on it again refuses (MESHP_REMOVED) instead
 *    of raising the tunnel and the rules again from the view it kept.
 * The files and containers the mesh created for modules stay, counted in `kept`: a module's data (a
 * store's) is not the mesh's to drop, and a held file is never the mesh's.
 */
import type { Leaving } from '../contract/plugin.js';
import type { FirewallDriver } from '../contract/providers.js';
import { MeshpError, isMeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import { restoreFound, type RetiredRecord } from '../lifecycle/flip.js';
import { RETIRED_KEY } from '../reconcile/reconciler.js';

/** Set once the node left: `{ at, why, network, node }`. */
export const LEFT_KEY = 'agent.left';

export interface LeftRecord {
  at: string;
  /** Why it left, for the operator: the controller's answer, or `meshp agent leave`. */
  why: string;
  network: string;
  node: string;
}

export interface LeaveOutcome {
  /** What was removed (in a preview: what would be), one phrase each. */
  removed: string[];
  /** What stays on the machine, and why. */
  kept: string[];
  /** What could not be done (the rest was done all the same), coded. */
  failed: string[];
}

export interface LeaveOptions {
  preview: boolean;
  why: string;
  network: string;
  node: string;
  progress?: (step: string) => void;
}

const failure = (what: string, e: unknown) => `${what}: ${isMeshpError(e) ? e.oneLine() : `MESHP_PLUGIN_FAILED: ${oneLine(e)}`}`;

/** Takes away (or, in a preview, says) what the mesh added; each step is tried even when one before failed. */
/** Why a state folder whose node left is not used again. */
export function leftRefusal(left: LeftRecord): MeshpError {
  return new MeshpError(
    'MESHP_REMOVED',
    `node ${left.node} left network ${left.network} at ${left.at} (${left.why}): this state folder is not used again; enrol the machine anew with another --state and a new token`,
  );
}

export async function leaveMesh(host: Host, o: LeaveOptions): Promise<LeaveOutcome> {
  const out: LeaveOutcome = { removed: [], kept: [], failed: [] };
  const progress = o.progress ?? (() => {});
  const store = await host.state();

  const leaving: Leaving = { preview: o.preview, removed: [], kept: [] };
  try {
    await host.call(host.hooks.leave, () => host.hooks.leave.promise(leaving));
  } catch (e) {
    out.failed.push(failure('a plugin could not take its part away', e));
  }
  out.removed.push(...leaving.removed);
  out.kept.push(...leaving.kept);

  let driver: FirewallDriver | null = null;
  try {
    driver = await host.firewall();
  } catch (e) {
    out.failed.push(failure('the firewall could not be read, so its marked rules were not looked for', e));
  }
  if (driver) await leaveFirewall(host, driver, o, out, progress);

  const owned = await store.listOwned();
  const count = (kind: string) => owned.filter((r) => r.kind === kind).length;
  const [files, containers] = [count('file'), count('container')];
  if (files + containers > 0)
    out.kept.push(`${files} file(s) and ${containers} container(s) the mesh made for its modules (their data is not the mesh's to drop)`);

  if (!o.preview) {
    const left: LeftRecord = { at: new Date().toISOString(), why: o.why, network: o.network, node: o.node };
    await store.setValue(LEFT_KEY, left);
    progress('left');
  }
  return out;
}

async function leaveFirewall(host: Host, driver: FirewallDriver, o: LeaveOptions, out: LeaveOutcome, progress: (s: string) => void): Promise<void> {
  const store = await host.state();
  const retired = await store.getValue<RetiredRecord>(RETIRED_KEY);
  // flip records `state: {}` when no found firewall was active: nothing was retired, nothing to give back.
  const foundRetired = retired !== null && Object.keys(retired.state).length > 0;
  if (retired && foundRetired) {
    out.removed.push(`the derived filter, after the found ${retired.kind} firewall it replaced is re-enabled from its configuration`);
    if (!o.preview) {
      try {
        await restoreFound(host, progress);
      } catch (e) {
        // The found firewall did not come back: the derived filter stays, the machine is not opened.
        out.removed.pop();
        out.failed.push(failure(`the found ${retired.kind} firewall could not be re-enabled, so the derived filter stays loaded`, e));
      }
    }
  } else if (retired) {
    out.kept.push(
      `the derived filter: no firewall was found on this machine when it converged, and unloading the filter would open every port; it is this machine's firewall now`,
    );
  }
  try {
    const marked = (await driver.openings()).map((x) => x.id);
    if (o.preview) {
      for (const id of marked) out.removed.push(`marked ${driver.kind} rule meshp:${id}`);
    } else {
      const r = await driver.ensure([], []);
      for (const id of r.removed) out.removed.push(`marked ${driver.kind} rule meshp:${id}`);
      progress(`removed ${r.removed.length} marked rule(s)`);
    }
  } catch (e) {
    out.failed.push(failure(`the mesh's marked ${driver.kind} rules could not be removed`, e));
  }
}

/** One line for the operator: what went, what stayed, what failed. */
export function describeLeave(o: LeaveOutcome, verb = 'removed'): string {
  const parts = [`${verb}: ${o.removed.length ? o.removed.join(', ') : 'nothing (nothing the mesh added is left here)'}`];
  if (o.kept.length) parts.push(`kept: ${o.kept.join('; ')}`);
  if (o.failed.length) parts.push(`not done: ${o.failed.join('; ')}`);
  return parts.join('; ');
}
