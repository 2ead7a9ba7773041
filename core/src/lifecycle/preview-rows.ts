/**
 * A converge preview as the operator reads it: one row per door, what it is now and what the flip
 * does to it. The CLI's table (`meshp node converge --preview`, `meshp host converge`) and the web
 * console's show these rows, so the two cannot say different things of one preview.
 */
import type { ConvergePreview, PreviewItem } from './preview.js';

export const PREVIEW_COLUMNS = ['PORT', 'SOURCE', 'ADDRESS', 'HELD BY', 'DECLARED BY', 'NOW', 'AFTER THE FLIP'] as const;

const AFTER = { open: 'stays open', closes: 'WILL CLOSE', local: 'local only' } as const;

/** Where the door is reachable from now, as an operator reads it. */
export function nowShown(i: PreviewItem): string {
  switch (i.now) {
    case 'open':
      return i.mentioned ? 'open' : 'open (no rule mentions it)';
    case 'open-from':
      return `from ${(i.nowFrom ?? []).join(', ')}`;
    case 'closed':
      return 'closed';
    case 'local':
      return 'local only';
    default:
      return 'unknown';
  }
}

/** What the flip does to the door; one that closes with live connections says so (perhaps the operator's own ssh session). */
export function afterShown(i: PreviewItem): string {
  if (i.after === 'open' && i.from?.length) return `stays open from ${i.from.join(', ')}`;
  // Already closed by the found firewall: the flip keeps it so, it does not close it.
  if (i.after === 'closes' && i.now === 'closed') return 'stays closed';
  if (i.after === 'closes' && i.liveConnections)
    return `WILL CLOSE: ${i.liveConnections} LIVE${i.port === 22 || /^sshd?\b/.test(i.holder) ? ' (ssh: your session?)' : ''}`;
  return AFTER[i.after];
}

/** The rows under PREVIEW_COLUMNS, one per door. */
export function previewRows(p: ConvergePreview): string[][] {
  return p.items.map((i) => [`${i.port}/${i.protocol}`, i.source, i.address, i.holder, i.declaredBy || '-', nowShown(i), afterShown(i)]);
}
