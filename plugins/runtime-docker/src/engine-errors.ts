/**
 * Every engine failure leaves this package as a coded MeshpError with the cause kept:
 * an engine that cannot be reached is UNAVAILABLE, a missing image is IMAGE_MISSING,
 * anything the engine refused is FAILED.
 */
import { MeshpError, type ErrorCode } from '@meshp/core';

const UNREACHABLE = new Set(['ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EACCES', 'ENOTSOCK', 'ABORT_ERR']);

interface EngineError {
  code?: unknown;
  name?: unknown;
  statusCode?: unknown;
  message?: unknown;
  json?: { message?: unknown } | null;
}

/** The engine's own words when it answered, else the transport's. */
export function engineMessage(e: unknown): string {
  const err = (e ?? {}) as EngineError;
  const fromJson = err.json && typeof err.json.message === 'string' ? err.json.message : undefined;
  if (fromJson) return fromJson.trim();
  return typeof err.message === 'string' ? err.message.trim() : String(e);
}

export function classify(e: unknown): ErrorCode {
  if (e instanceof MeshpError) return e.code;
  const err = (e ?? {}) as EngineError;
  if (typeof err.code === 'string' && UNREACHABLE.has(err.code)) return 'MESHP_RUNTIME_UNAVAILABLE';
  if (err.name === 'AbortError' || err.name === 'TimeoutError') return 'MESHP_RUNTIME_UNAVAILABLE';
  if (err.statusCode === undefined && /socket hang up|timeout/i.test(engineMessage(e))) return 'MESHP_RUNTIME_UNAVAILABLE';
  if (err.statusCode === 404 && /no such image/i.test(engineMessage(e))) return 'MESHP_IMAGE_MISSING';
  return 'MESHP_RUNTIME_FAILED';
}

export function isNotFound(e: unknown): boolean {
  return (e as EngineError | null)?.statusCode === 404;
}

/** Wraps an engine failure while doing `what` (e.g. "starting container web"). */
export function engineError(e: unknown, what: string, socketPath: string, details?: Record<string, unknown>): MeshpError {
  if (e instanceof MeshpError) return e;
  const code = classify(e);
  const reason = engineMessage(e);
  const message = code === 'MESHP_RUNTIME_UNAVAILABLE' ? `the Docker engine at ${socketPath} is not answering (${what}): ${reason}` : `${what}: ${reason}`;
  return new MeshpError(code, message, { cause: e, details: { socketPath, ...details } });
}
