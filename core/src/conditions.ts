/**
 * One factory per condition raised from several sites (the way Rollup's src/utils/logs.ts pairs a
 * code with a factory): a site names the condition, and the code follows from it, so one condition
 * cannot be given two codes at two sites. A condition raised at one site only builds its MeshpError
 * there. Each factory keeps the message its sites wrote.
 */
import { MeshpError } from './errors.js';

interface Because {
  cause?: unknown;
  details?: Record<string, unknown>;
}

/** A command or request used wrongly: a bad flag, an argument of the wrong shape (the CLI exits 2). */
export function usage(message: string, because?: Because): MeshpError {
  return new MeshpError('MESHP_USAGE', message, because);
}

/**
 * A named thing that does not exist: `no KIND NAME[ in WHERE][: HINT]`, e.g. notFound('node', 'web1',
 * 'default') is `no node web1 in default`.
 */
export function notFound(kind: string, name: string, where?: string, hint?: string): MeshpError {
  return new MeshpError('MESHP_NOT_FOUND', `no ${kind} ${name}${where === undefined ? '' : ` in ${where}`}${hint === undefined ? '' : `: ${hint}`}`);
}

/** A node name already in the network, at enrolment, join or rename: `node NODE is already in NETWORK[; HINT]`. */
export function nameTaken(node: string, network: string, hint?: string): MeshpError {
  return new MeshpError('MESHP_NAME_TAKEN', `node ${node} is already in ${network}${hint === undefined ? '' : `; ${hint}`}`);
}

/** An enrolment token that is not one, or is forged, revoked, used, expired or unknown. */
export function tokenInvalid(message: string, because?: Because): MeshpError {
  return new MeshpError('MESHP_TOKEN_INVALID', message, because);
}

/** A message (on the sync stream, or an answer of the controller) that cannot be decoded as one. */
export function malformed(message: string, because?: Because): MeshpError {
  return new MeshpError('MESHP_MESSAGE_MALFORMED', message, because);
}

/** An input (a file, a list, a value) over a size or count limit. */
export function inputTooLarge(message: string): MeshpError {
  return new MeshpError('MESHP_INPUT_TOO_LARGE', message);
}

/** No loaded plugin provides a part this act needs: `no plugin provides WHAT`. */
export function providerMissing(what: string): MeshpError {
  return new MeshpError('MESHP_PROVIDER_MISSING', `no plugin provides ${what}`);
}
