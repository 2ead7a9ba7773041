/**
 * `meshp policy get | set | test` (issue 28): the policy in force read back; a file previewed as the
 * controller's reachability diff (who gains and loses which peer and port) with a preview id that
 * `--yes --preview-id` applies exactly, or is refused MESHP_PREVIEW_STALE; a file's tests run by the
 * controller, on every set and alone.
 */
import { readFileSync, statSync } from 'node:fs';
import { MeshpError } from '@meshp/core';
import { inputTooLarge, usage } from '@meshp/core/util';
import { readPolicyDocument, type PolicyRuleInput, type PolicyTestInput } from '@meshp/core/schema';
import type { AdminResponse } from '@meshp/protocol';
import { confirmChange, printJson, say, type Change, type Out } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';

/** Input files are bounded before they are parsed (as ops.ts readJson). */
const MAX_INPUT_BYTES = 16 * 1024 * 1024;

function readFile(file: string): { rules: PolicyRuleInput[]; tests: PolicyTestInput[] } {
  let text: string;
  try {
    if (statSync(file).size > MAX_INPUT_BYTES) throw inputTooLarge(`${file} is larger than ${MAX_INPUT_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    if (cause instanceof MeshpError) throw cause;
    throw usage(`${file} is not readable`, { cause });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (cause) {
    throw usage(`${file} is not JSON`, { cause });
  }
  // Checked here by the one schema before anything is sent: "rulez", ports ["eighty"], expect "allow" are refused, naming the field.
  return readPolicyDocument(doc);
}

const rulesToWire = (rules: PolicyRuleInput[]) => rules.map((x) => ({ fromTag: x.from, toTag: x.to, ports: x.ports ?? [] }));
const ruleText = (r: { fromTag: string; toTag: string; ports: string[] }) => `${r.fromTag} -> ${r.toTag}${r.ports.length ? ` ports ${r.ports.join(',')}` : ''}`;

type Preview = AdminResponse<'previewPolicy'>;
type TestResult = Preview['tests'][number];

const testLine = (r: TestResult) =>
  `  ${r.passed ? 'ok  ' : 'FAIL'} ${r.test?.from} -> ${r.test?.to} ${r.test?.port} expect ${r.test?.expect}: ${r.got} (${r.reason})`;

/** Per node, what it gains (+) and loses (-): peers in its view, ports it may reach on a peer. */
export function renderDiff(p: Pick<Preview, 'changes'>): string {
  if (!p.changes.length) return '  no node gains or loses a peer or a port';
  const lines: string[] = [];
  for (const c of p.changes) {
    const said = [
      ...c.peersGained.map((x) => `+ peer ${x}`),
      ...c.portsGained.map((x) => `+ ${x.peer} ${x.ports.join(',')}`),
      ...c.peersLost.map((x) => `- peer ${x}`),
      ...c.portsLost.map((x) => `- ${x.peer} ${x.ports.join(',')}`),
    ];
    lines.push(`  ${c.node}`, ...said.map((s) => `      ${s}`));
  }
  return lines.join('\n');
}

function failedLine(results: TestResult[]): MeshpError | null {
  const failed = results.filter((r) => !r.passed);
  if (!failed.length) return null;
  const what = failed.map((r) => `${r.test?.from} -> ${r.test?.to} ${r.test?.port}: expected ${r.test?.expect}, got ${r.got} (${r.reason})`);
  return new MeshpError('MESHP_POLICY_TEST_FAILED', `${failed.length} of ${results.length} test(s) failed, nothing was set: ${what.join('; ')}`);
}

/** `meshp policy get`: the rules and tests in force, and the version that set them. */
export async function policyGet(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('getPolicy', { network }));
  const doc = { rules: r.rules.map((x) => ({ from: x.fromTag, to: x.toTag, ...(x.ports.length ? { ports: x.ports } : {}) })), tests: r.tests };
  if (a.json) return printJson({ ...doc, policyVersion: r.policyVersion, stateVersion: r.stateVersion });
  const head = `policy of ${a.network ?? 'default'}: ${r.rules.length} rule(s), ${r.tests.length} test(s), set at state version ${r.policyVersion || 'never'} (state version ${r.stateVersion})`;
  say(
    a,
    null,
    `${head}\n${r.rules.map((x) => `  ${ruleText(x)}`).join('\n') || '  (none: no node reaches another)'}${r.tests.length ? `\ntests:\n${r.tests.map((x) => `  ${x.from} -> ${x.to} ${x.port} expect ${x.expect}`).join('\n')}` : ''}`,
  );
}

/** `meshp policy test FILE`: the file's tests run by the controller against the file's rules; nothing is set. */
export async function policyTest(a: RemoteArgs & Out & { file: string }): Promise<void> {
  const { rules, tests } = readFile(a.file);
  const r = await withAdmin(a, (c, network) => c.call('testPolicy', { network, rules: rulesToWire(rules), tests }));
  const passed = r.results.filter((x) => x.passed).length;
  say(
    a,
    { results: r.results, passed, failed: r.results.length - passed },
    `${r.results.map(testLine).join('\n') || '  (the file has no tests)'}\n${passed} of ${r.results.length} test(s) passed`,
  );
  const failed = failedLine(r.results);
  if (failed) throw new MeshpError(failed.code, failed.message.replace(', nothing was set', ''));
}

/** `meshp policy set FILE --preview | --yes [--preview-id ID]`. */
export async function policySet(a: RemoteArgs & Out & Change & { file: string; previewId?: string }): Promise<void> {
  const { rules, tests } = readFile(a.file);
  const wire = { rules: rulesToWire(rules), tests };
  await withAdmin(a, async (c, network) => {
    let previewId = a.previewId ?? '';
    if (a.preview || !a.yes) {
      const p = await c.call('previewPolicy', { network, ...wire });
      const text = `would replace the policy of ${network} (set at state version ${p.policyVersion || 'never'}) with ${rules.length} rule(s), ${tests.length} test(s):\n${renderDiff(p)}${p.tests.length ? `\ntests:\n${p.tests.map(testLine).join('\n')}` : ''}`;
      if (a.preview) {
        say(
          a,
          { preview: true, previewId: p.previewId, rules, tests: p.tests, changes: p.changes, unchanged: p.unchanged, stateVersion: p.stateVersion },
          text,
        );
        const failed = failedLine(p.tests);
        if (failed) throw new MeshpError(failed.code, `${failed.message.replace(', nothing was set', '')} (preview: nothing changed)`);
        if (!a.json)
          process.stdout.write(`(preview ${p.previewId}: nothing changed; set it with meshp policy set ${a.file} --yes --preview-id ${p.previewId})\n`);
        return;
      }
      if (!a.json) process.stderr.write(`${text}\n`);
      await confirmChange(false, `Set this policy (preview ${p.previewId})?`, 'pass --yes to set it (or --preview to see what it does)');
      previewId = p.previewId;
    }
    const r = await c.call('setPolicy', { network, ...wire, previewId });
    say(
      a,
      { stateVersion: r.stateVersion, rules: rules.length, tests: tests.length },
      `policy of ${rules.length} rule(s) set (state version ${r.stateVersion})`,
    );
  });
}

/**
 * `meshp node tag NODE TAG… --preview | --yes [--preview-id ID]`: the node's tags replaced, previewed
 * as the controller's reachability diff (as a policy change is), applied to exactly that preview.
 */
export async function nodeTag(a: RemoteArgs & Out & Change & { node: string; tags: string[]; previewId?: string }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const ask = { network, node: a.node, tags: a.tags };
    let previewId = a.previewId ?? '';
    if (a.preview || !a.yes) {
      const p = await c.call('setTags', { ...ask, preview: true, previewId: '' });
      const text = `would change the tags of ${a.node} from ${p.tagsBefore.join(',') || '-'} to ${p.tagsAfter.join(',') || '-'}:\n${renderDiff(p)}`;
      if (a.preview) {
        say(
          a,
          {
            preview: true,
            previewId: p.previewId,
            node: a.node,
            tagsBefore: p.tagsBefore,
            tagsAfter: p.tagsAfter,
            changes: p.changes,
            unchanged: p.unchanged,
            stateVersion: p.stateVersion,
          },
          text,
        );
        if (!a.json)
          process.stdout.write(
            `(preview ${p.previewId}: nothing changed; apply it with meshp node tag ${a.node} ${p.tagsAfter.join(' ')} --yes --preview-id ${p.previewId})\n`,
          );
        return;
      }
      if (!a.json) process.stderr.write(`${text}\n`);
      await confirmChange(false, `Change the tags of ${a.node} (preview ${p.previewId})?`, 'pass --yes to change them (or --preview to see what it does)');
      previewId = p.previewId;
    }
    const r = await c.call('setTags', { ...ask, preview: false, previewId });
    say(
      a,
      { node: a.node, tagsBefore: r.tagsBefore, tagsAfter: r.tagsAfter, changes: r.changes, unchanged: r.unchanged, stateVersion: r.stateVersion },
      r.unchanged
        ? `${a.node} has the tags ${r.tagsAfter.join(',') || '-'} already: nothing changed (state version ${r.stateVersion})`
        : `tags of ${a.node}: ${r.tagsBefore.join(',') || '-'} -> ${r.tagsAfter.join(',') || '-'} (state version ${r.stateVersion})\n${renderDiff(r)}`,
    );
  });
}
