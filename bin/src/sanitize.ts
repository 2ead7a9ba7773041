/**
 * Nothing a node reports reaches the operator's terminal as a control sequence. A process name
 * set by any local user (prctl PR_SET_NAME), a reason, a path: all are text from elsewhere, and
 * an ESC, CSI, OSC or BEL in them would move the cursor, retitle the window, hide lines or worse.
 *
 * Every control character but newline and tab (C0, DEL, C1) and the bidirectional overrides is
 * written as its JSON escape, `\u001b`: visible and inert in a table, and, inside a JSON
 * document, a valid escape that decodes to the very character (JSON.stringify already escapes C0,
 * not C1 or the overrides), so `--json` output keeps the data exact.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

export function sanitize(text: string): string {
  return text.replace(CONTROL, escape);
}

type Write = typeof process.stdout.write;

/**
 * Routes every write to `stream` through sanitize: the one place the CLI's output (tables, JSON,
 * refusals) reaches a terminal. Buffers are decoded as UTF-8 first, as a terminal would.
 */
export function guardStream(stream: NodeJS.WriteStream): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  const guarded = (chunk: unknown, ...rest: unknown[]): boolean => {
    if (typeof chunk === 'string') return write(sanitize(chunk), ...rest);
    if (chunk instanceof Uint8Array) {
      const encoding = typeof rest[0] === 'string' ? rest.shift() : undefined;
      void encoding;
      return write(sanitize(Buffer.from(chunk).toString('utf8')), ...rest);
    }
    return write(chunk, ...rest);
  };
  stream.write = guarded as Write;
}
