/**
 * Every refusal carries a stable code. An error raised inside a plugin is attributed:
 * which plugin, which hook, the cause kept.
 */

import type { ErrorCode } from './codes.js';

// The codes by area, and the one flat map of them, are codes.ts; one factory per condition is conditions.ts.
export { CODES, type ErrorCode } from './codes.js';

export interface Attribution {
  plugin: string;
  hook: string;
}

export class MeshpError extends Error {
  readonly code: ErrorCode;
  readonly attribution?: Attribution;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; attribution?: Attribution; details?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'MeshpError';
    this.code = code;
    this.attribution = options.attribution;
    this.details = options.details;
  }

  /**
   * One line an operator can act on: the code first (scripts read up to the colon), why, and which
   * plugin refused at which hook or method, e.g. `MESHP_PLUGIN_FAILED: disk full [files-local at files.write]`.
   */
  oneLine(): string {
    const who = this.attribution ? ` [${this.attribution.plugin} at ${this.attribution.hook}]` : '';
    const cause =
      this.cause instanceof Error && !(this.cause instanceof MeshpError) && !this.message.includes(this.cause.message) ? `: ${this.cause.message}` : '';
    return `${this.code}: ${this.message}${cause}${who}`.replace(/\s*\n\s*/g, ' ');
  }
}

export function isMeshpError(e: unknown, code?: ErrorCode): e is MeshpError {
  return e instanceof MeshpError && (code === undefined || e.code === code);
}

/** Wraps anything thrown by a plugin so the operator reads which plugin, in which hook, failed. */
export function attribute(e: unknown, plugin: string, hook: string): MeshpError {
  if (e instanceof MeshpError) {
    if (e.attribution) return e;
    return new MeshpError(e.code, e.message, { cause: e.cause, details: e.details, attribution: { plugin, hook } });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new MeshpError('MESHP_PLUGIN_FAILED', message, { cause: e, attribution: { plugin, hook } });
}

/** A failure of core's own, not of a plugin: kept apart so a plugin is never blamed for it. */
export function internal(e: unknown, where: string): MeshpError {
  const message = e instanceof Error ? e.message : String(e);
  return new MeshpError('MESHP_INTERNAL', `${where}: ${message}`, { cause: e });
}

/** One line for any error; an error that no plugin raised and that carries no code is core's own. */
export function oneLine(e: unknown): string {
  if (e instanceof MeshpError) return e.oneLine();
  if (e instanceof Error) return `MESHP_INTERNAL: ${e.message}`;
  return `MESHP_INTERNAL: ${String(e)}`;
}
