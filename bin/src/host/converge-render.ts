/**
 * A converge preview shown: the local `meshp host converge` and the controller's (`meshp node converge`)
 * alike. Its own module so that the remote command loads no host assembly to show it.
 */
import { PREVIEW_COLUMNS, previewRows, type ConvergePreview } from '@meshp/core/lifecycle';
import { table } from '../output.js';

export function renderPreview(p: ConvergePreview): string {
  return [
    `converge preview ${p.id} for node ${p.node}: found firewall ${p.firewall.kind}${p.firewall.active ? ' (active)' : ''}`,
    table([...PREVIEW_COLUMNS], previewRows(p)),
    'the flip will:',
    ...p.steps.map((s, i) => `  ${i + 1}. ${s}`),
  ].join('\n');
}
