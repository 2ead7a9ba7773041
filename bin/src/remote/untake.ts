/**
 * `meshp module untake NODE MODULE` (issue 29, docs/adr/0027): the preview is the agent's, relayed by the
 * controller from the node's last report; `--yes --preview-id ID` records the untake for exactly that
 * preview (the controller refuses another, MESHP_PREVIEW_STALE), and the agent untakes on the machine only
 * if the machine still gives that id. This waits for the agent's outcome, done or refused, and says it.
 */
import type { AdminClient, wire } from '@meshp/transport-grpc';
import { Refusal, confirmChange, printJson } from '../output.js';
import { renderUntake } from '../host/untake.js';
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
async function outcome(c: AdminClient, network: string, a: ModuleUntakeArgs, previewId: string): Promise<wire.UntakeOutcome> {
  const deadline = Date.now() + a.timeout * 1000;
  for (;;) {
    const r = await c.call('showNode', { network, node: a.node });
    const done = r.untakes.find((u) => u.module === a.module && u.previewId === previewId);
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

type UntakeFacts = Pick<wire.ShowNodeResponse, 'untakePreviews' | 'untakes' | 'untakesAsked'>;

/** What node show and doctor say per module of untake (issue 29): whether it is possible, what blocks it, and the untakes asked. */
export function untakeLines(r: UntakeFacts): string[] {
  const lines: string[] = [];
  for (const p of r.untakePreviews) {
    const back = p.steps.filter((s) => s.op === 'restore' || s.op === 'remove' || s.op === 'recreate').length;
    if (p.blocks.length === 0) lines.push(`untake ${p.module}: possible (preview ${p.id}; ${back} resource(s) to put back)`);
    else lines.push(`untake ${p.module}: blocked: ${p.blocks.map((b) => `${b.code} (${b.key})`).join('; ')}`);
  }
  for (const u of r.untakesAsked) {
    const o = r.untakes.find((x) => x.module === u.module && x.previewId === u.previewId);
    const now = !o ? 'waiting for its agent' : o.result === 'done' ? 'done' : `refused: ${o.code}: ${o.message.split('\n')[0]}`;
    lines.push(`untake ${u.module} asked (preview ${u.previewId}): ${now}`);
  }
  return lines;
}

export function untakeJson(r: UntakeFacts) {
  return { untakePreviews: r.untakePreviews, untakes: r.untakes, untakesAsked: r.untakesAsked };
}
