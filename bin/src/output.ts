/** What every command prints: a human table by default, one JSON document with --json. */
import { createInterface } from 'node:readline/promises';
import { oneLine } from '@meshp/core/util';

export function table(headers: string[], rows: (string | number | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === undefined ? '' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A command's output flag. */
export interface Out {
  json: boolean;
}

/** A command that changes something: asked on a terminal, `--yes` elsewhere, `--preview` to only say. */
export interface Change {
  yes: boolean;
  preview: boolean;
}

/** One JSON document with --json, else the line a person reads. */
export const say = (o: Out, doc: unknown, human: string): void => {
  if (o.json) printJson(doc);
  else process.stdout.write(`${human}\n`);
};

/** A refusal: one line on stderr, exit 1. */
export class Refusal extends Error {
  constructor(
    readonly line: string,
    readonly exitCode = 1,
  ) {
    super(line);
  }
}

export function refuse(e: unknown): never {
  throw new Refusal(oneLine(e));
}

export async function confirm(question: string): Promise<boolean> {
  // terminal: false: readline's own cursor sequences would be escaped by sanitize.ts; the
  // terminal's cooked mode echoes the answer anyway.
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
  // An end of input (Ctrl-D) is a no: the question's promise never settles on its own then.
  const closed = new Promise<string>((resolve) => rl.once('close', () => resolve('')));
  try {
    return /^y(es)?$/i.test((await Promise.race([rl.question(question), closed])).trim());
  } finally {
    rl.close();
  }
}

/**
 * A change is made only when said yes to: `--yes`, or a yes typed on a terminal. Elsewhere it is
 * refused, with how to go on (`hint`).
 */
export async function confirmChange(yes: boolean, question: string, hint: string): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) throw new Refusal(`MESHP_CONFIRM_NEEDED: not asked on a terminal; ${hint}`);
  if (!(await confirm(`${question} [y/N] `))) throw new Refusal('MESHP_CONFIRM_NEEDED: nothing was changed');
}
