/**
 * Every refusal carries a stable code. An error raised inside a plugin is attributed:
 * which plugin, which hook, the cause kept.
 */

export const CODES = {
  MESHP_DECLARATION_INVALID: 'the declaration is not valid',
  MESHP_PATH_ESCAPES_ROOT: 'a path escapes the root prefix',
  MESHP_PATH_INVALID: 'a path is not absolute or not valid',
  MESHP_PROVIDER_MISSING: 'no plugin provides a required part',
  MESHP_PROVIDER_TWICE: 'two plugins provide the same part',
  MESHP_PLUGIN_INVALID: 'a plugin does not fit the contract',
  MESHP_PLUGIN_FAILED: 'a plugin failed',
  MESHP_INTERNAL: 'meshp itself failed (a bug: please report it with this line)',
  MESHP_GUARD_VETO: 'the guard refused an action that would touch a held resource',
  MESHP_VETOED: 'a plugin vetoed the plan',
  MESHP_STATE_CORRUPT: 'the host state store is not readable',
  MESHP_STATE_LOCKED: 'the host state store is in use by another process',
  MESHP_FIREWALL_UNKNOWN: 'the active firewall is of a kind no loaded plugin speaks',
  MESHP_FIREWALL_FAILED: 'the firewall refused a change',
  MESHP_FIREWALL_OUTPUT: 'the firewall tool answered with output that could not be read',
  MESHP_FIREWALL_TOOL_MISSING: 'a firewall tool is not installed',
  MESHP_RUNTIME_UNAVAILABLE: 'the container runtime is not answering',
  MESHP_RUNTIME_FAILED: 'the container runtime refused a change',
  MESHP_IMAGE_MISSING: 'a container image is not present',
  MESHP_DELTA_INVALID: 'a state delta is not valid',
  MESHP_DELTA_GAP: 'a state delta does not follow the applied version',
  MESHP_USAGE: 'a command was used wrongly',
  MESHP_CONFIRM_NEEDED: 'a change was not confirmed',
  MESHP_REFUSED: 'some resources were refused',
  MESHP_TOKEN_INVALID: 'an enrolment token is forged, used, expired or unknown',
  MESHP_AUTH_FAILED: 'a credential or a signature was not accepted',
  MESHP_FORBIDDEN: 'a caller asked for what is not its own',
  MESHP_TLS_PIN: "the controller's certificate is not the one pinned",
  MESHP_MESSAGE_TOO_LARGE: 'a message exceeds the size limit',
  MESHP_UNAVAILABLE: 'the controller is not reachable',
  MESHP_LIFECYCLE: 'the node is not in the mode this act needs',
  MESHP_PREVIEW_STALE: 'the machine changed since the preview',
  MESHP_LIVE_SESSION: 'the flip would close a port with live connections (an ssh session, perhaps your own)',
  MESHP_TIMEOUT: 'a node did not report the outcome in time',
  MESHP_MACHINE_IN_USE: 'a converged genesis was asked of a machine in use',
  MESHP_PORT_HELD: 'a port the foundation needs is held',
  MESHP_RANGE_OVERLAP: 'the private range overlaps the machine',
  MESHP_OPENING_INEFFECTIVE: 'an opening was written but the firewall does not let its range through',
  MESHP_OPENING_UNPLACEABLE: 'no place in the found firewall honours both its partial denials and its catch-all drop',
  MESHP_OPENING_UNVERIFIED: 'an opening was written but a match on its path cannot be read to verify it',
  MESHP_PATH_SYMLINK: 'a declared path goes through or ends at a symlink, which is never followed',
  MESHP_FILE_NOT_REGULAR: 'a declared path is a FIFO, socket, device or directory, not a regular file',
  MESHP_FILE_TOO_LARGE: 'a file exceeds the size limit',
  MESHP_FILE_SWAPPED: 'a file changed between the plan and the write',
  MESHP_FILE_ALIASED: 'two paths reach one file',
  MESHP_INPUT_TOO_LARGE: 'an input is over a size or count limit',
  MESHP_TUNNEL_FAILED: 'the tunnel device refused a change',
  MESHP_TUNNEL_UNAVAILABLE: 'no WireGuard implementation is available on this machine',
  MESHP_TUNNEL_MISMATCH: "the tunnel asked for is not the one this node records (its interface and key): refused, nothing changed",
  MESHP_NOT_FOUND: 'a node, module or network named does not exist',
  MESHP_POLICY_INVALID: 'a policy is not valid',
  MESHP_NAME_TAKEN: 'a node of that name is already in the network',
  MESHP_KEY_IN_USE: 'a node key is already enrolled in the network',
  MESHP_NODE_REVOKED: 'the node was removed: its credential and key are revoked',
  MESHP_REMOVED: 'this node left its network (removed by the controller, or meshp agent leave): what the mesh added was taken away',
  MESHP_MESSAGE_MALFORMED: 'a message could not be decoded',
  MESHP_RATE_LIMITED: 'a peer sent more of a message than it may',
  MESHP_DIVERGED: "an agent's state hash kept differing from the controller's: snapshots stopped",
  MESHP_VERSION_UNPROVEN: 'a version was claimed without the controller signature that proves it',
  MESHP_STATE_UNSAFE: 'a state folder or file others could write or swap: refused, not used',
  MESHP_MODULES_CLASH: 'two modules of one node declare the same file, container, opening or host port',
  MESHP_STORE_TOO_NEW: "the controller's database has a schema newer than this meshp knows: refused, not changed",
  MESHP_STORE_UNAVAILABLE: "the controller's database did not answer",
  MESHP_SETTING_MISSING: 'a module names a setting the node does not have: its declaration could not be sent',
  MESHP_MODULE_ASSIGNED: 'a catalogue module is assigned to nodes: unassign it from them first',
  MESHP_TOKEN_USED: 'an enrolment token was used already: revoking it would change nothing',
} as const;

export type ErrorCode = keyof typeof CODES;

export interface Attribution {
  plugin: string;
  hook: string;
}

export class MeshpError extends Error {
  readonly code: ErrorCode;
  readonly attribution?: Attribution;
  readonly details?: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { cause?: unknown; attribution?: Attribution; details?: Record<string, unknown> } = {},
  ) {
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
