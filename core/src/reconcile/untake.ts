/**
 * Untake (issue 29): a taken module's take undone on an adopted node, through the host's plugins. Everything
 * is read first and the rule (untake-rule.ts) decides; a plan with any block changes nothing. Otherwise each
 * found resource is put back (a file its original bytes, mode and owner, written only over the file the plan
 * saw; a container its predecessor, recreated from the recorded inspect document), and each is recorded held
 * again in the transaction that forgets it as the host's own. Then the declaration is reconciled with the
 * module assigned and not taken: its resources are found again, held, and reported so, and its openings go.
 */
import type { Declaration } from '../contract/model.js';
import type { ContainerRuntime, FileStore, HostStateStore, Restorability } from '../contract/providers.js';
import { MeshpError } from '../errors.js';
import { notFound } from '../conditions.js';
import type { Host } from '../host/host.js';
import { validateDeclaration } from '../schema/validate.js';
import type { ContentKind, Handlers } from './handlers.js';
import { handlersOf, loadRecords, Reconciler, type ReconcileResult } from './reconciler.js';
import type { Records, Seen } from './rule.js';
import { originalMode, planUntake, type UntakePlan, type UntakeStep } from './untake-rule.js';

/** The host's note of an untake under way (its module and preview id), cleared when it ends. */
export const UNTAKE_KEY = 'untake.running';

export interface UntakeOptions {
  preview?: boolean;
  /** The preview id the operator saw: a plan that is not it any more is refused MESHP_PREVIEW_STALE. */
  previewId?: string;
  now?: () => Date;
}

export interface UntakeResult {
  plan: UntakePlan;
  /** The reconcile with the module held again; absent for a preview. */
  after?: ReconcileResult;
}

interface Read {
  decl: Declaration;
  store: HostStateStore;
  records: Records;
  handlers: Handlers;
  seen: Map<string, Seen>;
  plan: UntakePlan;
}

function keysOf(decl: Declaration, module: string, records: Records): string[] {
  const m = decl.modules.find((x) => x.name === module)!;
  const keys = new Set<string>([...(m.files ?? []).map((f) => `file:${f.path}`), ...(m.containers ?? []).map((c) => `container:${c.name}`)]);
  for (const r of records.owned.values()) if (r.module === module && r.kind !== 'opening') keys.add(r.key);
  return [...keys];
}

async function restorability(runtime: ContainerRuntime | null, records: Records, keys: string[]): Promise<Map<string, Restorability | Error>> {
  const out = new Map<string, Restorability | Error>();
  if (!runtime?.restorable) return out;
  for (const key of keys) {
    const original = records.originals.get(key);
    if (!key.startsWith('container:') || !original) continue;
    try {
      out.set(key, await runtime.restorable(JSON.parse(new TextDecoder().decode(original.original))));
    } catch (e) {
      out.set(key, e instanceof Error ? e : new Error(String(e)));
    }
  }
  return out;
}

function checkAsked(decl: Declaration, module: string): void {
  const m = decl.modules.find((x) => x.name === module);
  if (!m) throw notFound('module', module, `the declaration of node ${decl.node}`, 'only an assigned, taken module can be untaken');
  if (decl.mode === 'converged') {
    throw new MeshpError('MESHP_LIFECYCLE', `node ${decl.node} is converged: untake is for a module taken on an adopted node (return it to adopted first)`);
  }
  if (!m.taken) throw new MeshpError('MESHP_UNTAKE_NOT_TAKEN', `module ${module} is not taken on node ${decl.node}: nothing to untake`);
}

/** Everything untake needs, read before anything changes, and the plan made of it. */
async function read(host: Host, input: unknown, module: string): Promise<Read> {
  const decl = validateDeclaration(input);
  checkAsked(decl, module);
  const store = await host.state();
  const records = await loadRecords(store);
  const handlers = await handlersOf(host);
  const keys = keysOf(decl, module, records);
  const seen = new Map<string, Seen>();
  const now = new Map<string, Uint8Array>();
  for (const key of keys) {
    const kind = key.slice(0, key.indexOf(':')) as ContentKind;
    const h = handlers[kind];
    if (!h) continue;
    try {
      const s = await h.observe(key.slice(kind.length + 1));
      seen.set(key, s);
      if (s && kind === 'file') now.set(key, await s.original());
    } catch (e) {
      seen.set(key, e instanceof Error ? e : new Error(String(e)));
    }
  }
  const m = decl.modules.find((x) => x.name === module)!;
  const written = new Map((m.files ?? []).map((f) => [`file:${f.path}`, f.content]));
  const restorable = await restorability(await host.runtime(), records, keys);
  const running = await store.getValue<{ module: string }>(UNTAKE_KEY);
  const plan = planUntake({ node: decl.node, module: m, records, seen, restorable, written, now, resuming: running?.module === module });
  return { decl, store, records, handlers, seen, plan };
}

/** The refusal of a plan with blocks: every block, each coded, the diff of a changed file under it. */
export function untakeRefusal(plan: UntakePlan): MeshpError {
  const lines = plan.blocks.map((b) => `${b.code}: ${b.reason}${b.diff ? `\n${b.diff}` : ''}`);
  return new MeshpError(plan.blocks[0]!.code, `module ${plan.module} cannot be untaken faithfully; nothing changed:\n${lines.join('\n')}`, {
    details: { module: plan.module, blocks: plan.blocks },
  });
}

async function putBack(step: UntakeStep, r: Read, files: FileStore | null, runtime: ContainerRuntime | null): Promise<void> {
  const original = r.records.originals.get(step.key)!;
  const s = r.seen.get(step.key);
  const identity = s && !(s instanceof Error) ? (s.identity ?? null) : null;
  const id = step.key.slice(step.key.indexOf(':') + 1);
  if (step.kind === 'file' && files) {
    if (step.op === 'remove') {
      await files.remove(id, identity === null ? {} : { expect: identity });
      await r.store.forgetOwned(step.key);
      return;
    }
    const meta = original.meta;
    const owner = meta?.uid !== undefined ? { owner: { uid: meta.uid, gid: meta.gid ?? meta.uid } } : {};
    const written = await files.write(id, original.original, originalMode(original), { expect: identity, ...owner });
    await r.store.refound(step.key, original.fingerprint, written ?? null);
    return;
  }
  if (step.kind === 'container' && runtime?.restore) {
    // The runtime replaces the mesh's container as it replaces any (aside, create, start, remove; rolled back on failure).
    await runtime.restore(JSON.parse(new TextDecoder().decode(original.original)));
    const now = await r.handlers.container!.observe(id);
    if (!now) throw new MeshpError('MESHP_RUNTIME_FAILED', `container ${id} was recreated and is not there`);
    await r.store.refound(step.key, now.fingerprint, null);
  }
}

/** Previews or does an untake of `module` on the machine the host runs on; the declaration says it is taken. */
export async function untake(host: Host, input: unknown, module: string, options: UntakeOptions = {}): Promise<UntakeResult> {
  const r = await read(host, input, module);
  const { plan } = r;
  if (options.preview) return { plan };
  if (options.previewId !== undefined && options.previewId !== plan.id) {
    throw new MeshpError(
      'MESHP_PREVIEW_STALE',
      `the machine changed since preview ${options.previewId}: untake of ${module} now is preview ${plan.id}; nothing changed`,
    );
  }
  if (plan.blocks.length > 0) throw untakeRefusal(plan);
  const files = await host.files();
  const runtime = await host.runtime();
  await r.store.setValue(UNTAKE_KEY, { module, id: plan.id, at: (options.now ?? (() => new Date()))().toISOString() });
  for (const step of plan.steps) if (step.op === 'restore' || step.op === 'remove' || step.op === 'recreate') await putBack(step, r, files, runtime);
  const held = { ...r.decl, modules: r.decl.modules.map((m) => (m.name === module ? { ...m, taken: false } : m)) };
  const after = await new Reconciler(host).reconcile(held, options.now ? { now: options.now } : {});
  await r.store.setValue(UNTAKE_KEY, null);
  return { plan, after };
}
