/** Coded errors across the wire: a MESHP code travels in the status details and comes back as itself. */
import { status as Status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { CODES, MeshpError, isMeshpError, type ErrorCode, type TransportError } from '@meshp/core';

const TO_STATUS: Partial<Record<ErrorCode, Status>> = {
  MESHP_TOKEN_INVALID: Status.UNAUTHENTICATED,
  MESHP_TOKEN_USED_UP: Status.UNAUTHENTICATED,
  MESHP_AUTH_FAILED: Status.UNAUTHENTICATED,
  MESHP_FORBIDDEN: Status.PERMISSION_DENIED,
  MESHP_USAGE: Status.INVALID_ARGUMENT,
  MESHP_MESSAGE_TOO_LARGE: Status.RESOURCE_EXHAUSTED,
  MESHP_DELTA_INVALID: Status.INVALID_ARGUMENT,
  MESHP_MESSAGE_MALFORMED: Status.INVALID_ARGUMENT,
  MESHP_RATE_LIMITED: Status.RESOURCE_EXHAUSTED,
};

/** What a handler threw, as a gRPC status whose details start with the code. */
export function toStatus(e: unknown): Partial<StatusObject> {
  if (isMeshpError(e)) return { code: TO_STATUS[e.code] ?? Status.INTERNAL, details: `${e.code}: ${e.message}` };
  const message = e instanceof Error ? e.message : String(e);
  return { code: Status.INTERNAL, details: `MESHP_PLUGIN_FAILED: ${message}` };
}

export function transportError(e: unknown): TransportError {
  const m = fromStatus(e);
  return { code: m.code, message: m.message };
}

/** A status (or any error) as a MeshpError: the code it carried, or one read from the status. */
export function fromStatus(e: unknown): MeshpError {
  if (isMeshpError(e)) return e;
  const s = e as Partial<ServiceError>;
  const details = typeof s.details === 'string' ? s.details : e instanceof Error ? e.message : String(e);
  const m = /^(MESHP_[A-Z_]+): (.*)$/s.exec(details);
  if (m && m[1]! in CODES) return new MeshpError(m[1] as ErrorCode, m[2]!);
  switch (s.code) {
    case Status.RESOURCE_EXHAUSTED:
      return new MeshpError('MESHP_MESSAGE_TOO_LARGE', details, { cause: e });
    case Status.UNAVAILABLE:
    case Status.DEADLINE_EXCEEDED:
    case Status.CANCELLED:
      return new MeshpError('MESHP_UNAVAILABLE', details, { cause: e });
    case Status.UNAUTHENTICATED:
      return new MeshpError('MESHP_AUTH_FAILED', details, { cause: e });
    default:
      return new MeshpError('MESHP_PLUGIN_FAILED', details, { cause: e });
  }
}
