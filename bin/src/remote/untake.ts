/**
 * `meshp module untake NODE MODULE` (issue 29, docs/adr/0027): the preview is the agent's, relayed by the
 * controller from the node's last report; `--yes --preview-id ID` records the untake for exactly that
 * preview (the controller refuses another, MESHP_PREVIEW_STALE), and the agent untakes on the machine only
 * if the machine still gives that id. This waits for the agent's outcome, done or refused, and says it.
 */
import type { AdminClient, wire } from '@meshp/transport-grpc';
import { Refusal, confirmChange, printJson } from '../output.js';
import { renderUntake } from '../host/untake-render.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';
import { nodeJson } from './render.js';

export interface ModuleUntakeArgs extends RemoteArgs {
  node: string;
  module: string;
  json: boolean;
  yes: boolean;
  preview: boolean;
  previewId?: string;
  timeout: number;
}

type WireUntakePreview = wire.UntakePreview;

const out = (a: { json: boolean }, line: string) => {
  if (!a.json) process.stdout.write(`${line}\n`);
};

const shown = (node: string, p: WireUntakePreview) => ({ ...p, node, blocks: p.blocks.map((b) => ({ ...b, ...(b.diff ? {} : { diff: undefined }) })) });

/** Polls the node until its agent reports the outcome of the untake of `module` to `previewId`. */
async function outcome(c: AdminClient, network: string, a: ModuleUntakeArgs, previewId: string, release = false): Promise<wire.UntakeOutcome> {
  const deadline = Date.now() + a.timeout * 1000;
  for (;;) {
    const r = await c.call('showNode', { network, node: a.node });
    const done = r.untakes.find((u) => u.module === a.module && u.previewId === previewId && u.release === release);
    if (done) return done;
    if (Date.now() > deadline) {
      const node = present(r.node, 'node');
      throw new Refusal(
        `MESHP_TIMEOUT: node ${a.node} did not report the untake of ${a.module} within ${a.timeout} s (${node.connected ? 'connected' : `not connected, last seen ${node.lastSeen || 'never'}`}); it is recorded, and its agent untakes it when it next reconciles; see meshp node show ${a.node}`,
      );
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}

export async function moduleUntake(a: ModuleUntakeArgs): Promise<void> {
  await withAdmin(a, async (c, network) => {
    let previewId = a.previewId;
    // --yes without --preview-id untakes to the preview shown now, as `meshp host untake --yes` does.
    if (a.preview || !a.yes || !previewId) {
      const r = await c.call('previewUntake', { network, node: a.node, module: a.module });
      const p = present(r.preview, 'preview');
      if (a.preview && a.json) return printJson({ node: nodeJson(present(r.node, 'node')), preview: p });
      out(a, renderUntake(shown(a.node, p)));
      if (a.preview) {
        const next = p.blocks.length > 0 ? 'untake is refused until what blocks it is resolved' : `untake with --yes --preview-id ${p.id}`;
        return out(a, `(preview: nothing changed; ${next})`);
      }
      await confirmChange(a.yes, `Untake module ${a.module} on ${a.node} (preview ${p.id})?`, 'pass --yes --preview-id ID to untake');
      previewId ??= p.id;
    }
    if (!previewId) throw new Refusal('MESHP_INTERNAL: no preview id', 1);
    const r = await c.call('untakeModule', { network, node: a.node, module: a.module, previewId });
    out(a, `requested: untake of ${a.module} on ${a.node} to preview ${previewId} (state version ${r.stateVersion}); waiting for its agent:`);
    const o = await outcome(c, network, a, previewId);
    const after = await c.call('showNode', { network, node: a.node });
    const resources = after.resources.filter((x) => x.module === a.module);
    if (a.json) printJson({ node: nodeJson(present(after.node, 'node')), preview: r.preview, outcome: o, resources });
    if (o.result !== 'done')
      throw new Refusal(`${o.code || 'MESHP_REFUSED'}: ${o.message} (module ${a.module} stays taken on ${a.node}; take it again to end the untake asked)`);
    out(a, `module ${a.module} untaken on ${a.node}, by its agent's report${o.message ? ` (${o.message})` : ''}; now:`);
    for (const x of resources) out(a, `  ${x.state.padEnd(8)} ${x.key}${x.reason ? `  ${x.reason}` : ''}`);
  });
}

type UntakeFacts = Pick<wire.ShowNodeResponse, 'untakePreviews' | 'untakes' | 'untakesAsked' | 'releasePreviews'>;

/** What node show and doctor say per module of untake (issue 29): whether it is possible, what blocks it, and the untakes asked. */
export function untakeLines(r: UntakeFacts): string[] {
  const lines: string[] = [];
  for (const p of r.untakePreviews) {
    const back = p.steps.filter((s) => s.op === 'restore' || s.op === 'remove' || s.op === 'recreate').length;
    if (p.blocks.length === 0) lines.push(`untake ${p.module}: possible (preview ${p.id}; ${back} resource(s) to put back)`);
    else lines.push(`untake ${p.module}: blocked: ${p.blocks.map((b) => `${b.code} (${b.key})`).join('; ')}`);
  }
  for (const p of r.releasePreviews) {
    const n = p.steps.filter((s) => s.op === 'restore').length;
    if (n > 0) lines.push(`release ${p.module}: ${n} held file(s) changed while held (release --restore puts their originals back; preview ${p.id})`);
  }
  for (const u of r.untakesAsked) {
    const o = r.untakes.find((x) => x.module === u.module && x.previewId === u.previewId && !x.release);
    const now = !o ? 'waiting for its agent' : o.result === 'done' ? 'done' : `refused: ${o.code}: ${o.message.split('\n')[0]}`;
    lines.push(`untake ${u.module} asked (preview ${u.previewId}): ${now}`);
  }
  return lines;
}

export function untakeJson(r: UntakeFacts) {
  return { untakePreviews: r.untakePreviews, untakes: r.untakes, untakesAsked: r.untakesAsked, releasePreviews: r.releasePreviews };
}

/** `meshp module release NODE MODULE [--restore]`: unassigned, held files left as they are; with --restore, those changed while held put back. */
export async function moduleRelease(a: ModuleUntakeArgs & { restore: boolean }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const ask = (preview: boolean, previewId = '') =>
      c.call('releaseModule', { network, node: a.node, module: a.module, restore: a.restore, preview, previewId });
    const p = present((await ask(true)).preview, 'preview');
    const restores = p.steps.filter((s) => s.op === 'restore');
    const human = [
      `release preview ${p.id || '-'} for module ${a.module} on node ${a.node}: unassigned, its held files left as they are${a.restore ? ', but each one that changed while held gets its original back' : ''}`,
      ...p.steps.map((s) => `  ${a.restore && s.op === 'restore' ? 'RESTORE' : 'keep   '} ${s.key}: ${s.what}`),
      ...p.blocks.map((b) => `BLOCKED ${b.key}: ${b.code}: ${b.reason}`),
      ...(!a.restore && restores.length > 0 ? [`(${restores.length} held file(s) changed while held: --restore puts their originals back)`] : []),
    ].join('\n');
    if (a.preview) {
      if (a.json) return printJson({ preview: p, restore: a.restore });
      return out(a, `${human}\n(preview: nothing changed${a.restore && restores.length ? `; release with --restore --yes --preview-id ${p.id}` : ''})`);
    }
    out(a, human);
    await confirmChange(
      a.yes,
      `Release module ${a.module} on ${a.node}${a.restore ? ' and put back what changed while held' : ''}?`,
      'pass --yes (and --preview-id) to release',
    );
    const previewId = a.previewId ?? p.id;
    const r = await ask(false, previewId);
    if (!a.restore || restores.length === 0) {
      if (a.json) printJson({ preview: r.preview, stateVersion: r.stateVersion });
      return out(a, `module ${a.module} released on ${a.node} (state version ${r.stateVersion}): its held files stay as they are`);
    }
    out(a, `requested: release of ${a.module} on ${a.node} with --restore to preview ${previewId} (state version ${r.stateVersion}); waiting for its agent:`);
    const o = await outcome(c, network, a, previewId, true);
    if (a.json) printJson({ preview: r.preview, outcome: o });
    if (o.result !== 'done') throw new Refusal(`${o.code || 'MESHP_REFUSED'}: ${o.message} (module ${a.module} is released; its held files are as they were)`);
    out(a, `module ${a.module} released on ${a.node}, by its agent's report: ${o.message}`);
  });
}
