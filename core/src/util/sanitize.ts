/**
 * Nothing from elsewhere reaches a terminal as a control sequence: a process name set by any
 * local user (prctl PR_SET_NAME), a path or a file name, a peer's error message. An ESC, CSI, OSC
 * or BEL in them would move the cursor, retitle the window, hide lines or worse, and a
 * bidirectional override would show a line in another order than it holds.
 *
 * Every control character but newline and tab (C0, DEL, C1) and the bidirectional marks and
 * overrides is written as its JSON escape, `\u001b`: visible and inert in a table, and, inside a
 * JSON document or log line, a valid escape that decodes to the very character (JSON.stringify
 * already escapes C0, not DEL, C1 or the overrides), so the data stays exact.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

export function sanitize(text: string): string {
  return text.replace(CONTROL, escape);
}

/**
 * pino's options for every meshp log (agent and controller): JSON lines whose text from files,
 * names and peers is escaped by sanitize just before the line is written. Plain data, so core
 * needs no pino of its own.
 */
export function logOptions(
  name: string,
  level: string,
): { name: string; level: string; base: { pid: number }; hooks: { streamWrite: (line: string) => string } } {
  return { name, level, base: { pid: process.pid }, hooks: { streamWrite: sanitize } };
}
