/** What every command prints: a human table by default, one JSON document with --json. */
import { oneLine } from '@meshp/core';

export function table(headers: string[], rows: (string | number | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === undefined ? '' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i]!))).join('  ').trimEnd())
    .join('\n');
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A refusal: one line on stderr, exit 1. */
export class Refusal extends Error {
  constructor(readonly line: string, readonly exitCode = 1) {
    super(line);
  }
}

export function refuse(e: unknown): never {
  throw new Refusal(oneLine(e));
}
