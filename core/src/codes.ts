/**
 * Every refusal's stable code with what it means, grouped by the area that raises it (the way
 * Fastify's lib/errors.js groups its codes). `CODES` is the one flat map of them all: scripts, tests
 * and docs read a code, never its area, so a code keeps its name and meaning when an area is regrouped.
 */

/** The host assembling plugins, their contract, the declaration they apply, the plan and its guard. */
export const HOST_CODES = {
  MESHP_DECLARATION_INVALID: 'the declaration is not valid',
  MESHP_PROVIDER_MISSING: 'no plugin provides a required part',
  MESHP_PROVIDER_TWICE: 'two plugins provide the same part',
  MESHP_PLUGIN_INVALID: 'a plugin does not fit the contract',
  MESHP_PLUGIN_FAILED: 'a plugin failed',
  MESHP_INTERNAL: 'meshp itself failed (a bug: please report it with this line)',
  MESHP_GUARD_VETO: 'the guard refused an action that would touch a held resource',
  MESHP_VETOED: 'a plugin vetoed the plan',
  MESHP_REFUSED: 'some resources were refused',
  MESHP_MODULES_CLASH: 'two modules of one node declare the same file, container, opening or host port',
} as const;

/** Declared files and the paths to them under the root. */
export const FILE_CODES = {
  MESHP_PATH_ESCAPES_ROOT: 'a path escapes the root prefix',
  MESHP_PATH_INVALID: 'a path is not absolute or not valid',
  MESHP_PATH_SYMLINK: 'a declared path goes through or ends at a symlink, which is never followed',
  MESHP_FILE_NOT_REGULAR: 'a declared path is a FIFO, socket, device or directory, not a regular file',
  MESHP_FILE_TOO_LARGE: 'a file exceeds the size limit',
  MESHP_FILE_SWAPPED: 'a file changed between the plan and the write',
  MESHP_FILE_ALIASED: 'two paths reach one file',
} as const;

/** The firewall: its kind, its tools, and the openings written into it. */
export const FIREWALL_CODES = {
  MESHP_FIREWALL_UNKNOWN: 'the active firewall is of a kind no loaded plugin speaks',
  MESHP_FIREWALL_FAILED: 'the firewall refused a change',
  MESHP_FIREWALL_OUTPUT: 'the firewall tool answered with output that could not be read',
  MESHP_FIREWALL_TOOL_MISSING: 'a firewall tool is not installed',
  MESHP_OPENING_INEFFECTIVE: 'an opening was written but the firewall does not let its range through',
  MESHP_OPENING_UNPLACEABLE: 'no place in the found firewall honours both its partial denials and its catch-all drop',
  MESHP_OPENING_UNVERIFIED: 'an opening was written but a match on its path cannot be read to verify it',
} as const;

/** The container runtime. */
export const RUNTIME_CODES = {
  MESHP_RUNTIME_UNAVAILABLE: 'the container runtime is not answering',
  MESHP_RUNTIME_FAILED: 'the container runtime refused a change',
  MESHP_IMAGE_MISSING: 'a container image is not present',
} as const;

/** The delta protocol and the stream that carries it between an agent and the controller. */
export const SYNC_CODES = {
  MESHP_DELTA_INVALID: 'a state delta is not valid',
  MESHP_DELTA_GAP: 'a state delta does not follow the applied version',
  MESHP_MESSAGE_TOO_LARGE: 'a message exceeds the size limit',
  MESHP_MESSAGE_MALFORMED: 'a message could not be decoded',
  MESHP_RATE_LIMITED: 'a peer sent more of a message than it may',
  MESHP_UNAVAILABLE: 'the controller is not reachable',
  MESHP_DIVERGED: "an agent's state hash kept differing from the controller's: snapshots stopped",
  MESHP_VERSION_UNPROVEN: 'a version was claimed without the controller signature that proves it',
} as const;

/** Enrolment and who a caller is: tokens, credentials, the pinned certificate, a node's name and key. */
export const AUTH_CODES = {
  MESHP_TOKEN_INVALID: 'an enrolment token is forged, used, expired or unknown',
  MESHP_TOKEN_USED: 'an enrolment token was used already: revoking it would change nothing',
  MESHP_TOKEN_USED_UP: 'a reusable enrolment token has enrolled as many nodes as it may: make another',
  MESHP_TAG_RESERVED: "a tag is the control-node's, given at genesis only: no token or command gives it",
  MESHP_AUTH_FAILED: 'a credential or a signature was not accepted',
  MESHP_FORBIDDEN: 'a caller asked for what is not its own',
  MESHP_TLS_PIN: "the controller's certificate is not the one pinned",
  MESHP_NAME_TAKEN: 'a node of that name is already in the network',
  MESHP_KEY_IN_USE: 'a node key is already enrolled in the network',
  MESHP_NODE_REVOKED: 'the node was removed: its credential and key are revoked',
  MESHP_NODE_EXPIRED: "the node's credential expired: its hello is refused and its peers drop it until an admin renews it (meshp node renew)",
} as const;

/** The controller's networks, nodes, catalogue and policy, and the admin inputs that change them. */
export const CONTROLLER_CODES = {
  MESHP_NOT_FOUND: 'a node, module, network or host state named does not exist',
  MESHP_NODE_OFFLINE: "what was asked needs the node's agent on its stream now (meshp node rekey), and it is not connected",
  MESHP_POLICY_INVALID: 'a policy is not valid',
  MESHP_POLICY_TEST_FAILED: "a policy's tests failed: the policy was not set",
  MESHP_DNS_INVALID: "a network's DNS (dns set FILE) is not valid",
  MESHP_ROUTE_INVALID: 'a route group (route set) is not valid: its name, a prefix, a via node, or a prefix another group or the private range holds',
  MESHP_RELAY_INVALID: 'a relay (relay set) is not valid: its id, address, port, transport, or a secret the controller does not hold',
  MESHP_INPUT_TOO_LARGE: 'an input is over a size or count limit',
  MESHP_SETTING_MISSING: 'a module names a setting the node does not have: its declaration could not be sent',
  MESHP_MODULE_ASSIGNED: 'a catalogue module is assigned to nodes: unassign it from them first',
} as const;

/** A node's lifecycle: genesis, adoption, the preview and the flip, leaving. */
export const LIFECYCLE_CODES = {
  MESHP_LIFECYCLE: 'the node is not in the mode this act needs',
  MESHP_PREVIEW_STALE: 'what was previewed changed since (the machine; for a policy, the policy in force or the membership)',
  MESHP_LIVE_SESSION: 'the flip would close a port with live connections (an ssh session, perhaps your own)',
  MESHP_TIMEOUT: 'a node did not report the outcome in time',
  MESHP_MACHINE_IN_USE: 'a converged genesis was asked of a machine in use',
  MESHP_PORT_HELD: 'a port the foundation needs is held',
  MESHP_RANGE_OVERLAP: 'the private range overlaps the machine',
  MESHP_UNTAKE_NOT_TAKEN: 'untake was asked of a module that is not taken on this node',
  MESHP_UNTAKE_IMAGE_GONE: "a replaced container's original image is no longer on the machine: it cannot be recreated as it was",
  MESHP_UNTAKE_NO_ORIGINAL: 'a resource the take changed has no recorded original: it cannot be put back',
  MESHP_UNTAKE_CHANGED: 'a resource changed since the take by something else: restoring would lose that change',
  MESHP_UNTAKE_VOLUME_GONE: 'a volume the replaced container used has been removed: it would be recreated empty',
  MESHP_UNTAKE_UNREADABLE: 'a resource the take changed cannot be read now',
  MESHP_REMOVED: 'this node left its network (removed by the controller, or meshp agent leave): what the mesh added was taken away',
} as const;

/** Where state is kept: the host state store, private state folders, the controller's database. */
export const STORE_CODES = {
  MESHP_STATE_CORRUPT: 'the host state store is not readable',
  MESHP_STATE_LOCKED: 'the host state store is in use by another process',
  MESHP_STATE_UNSAFE: 'a state folder or file others could write or swap: refused, not used',
  MESHP_STORE_TOO_NEW: "the controller's database has a schema newer than this meshp knows: refused, not changed",
  MESHP_STORE_UNAVAILABLE: "the controller's database did not answer",
  MESHP_STORE_FULL: 'the disk under a store is full: the write was refused and nothing changed',
  MESHP_STORE_REFUSED: "the controller's database refused a statement (its SQLSTATE says why): nothing changed",
} as const;

/** The private network's tunnel device. */
export const TUNNEL_CODES = {
  MESHP_TUNNEL_FAILED: 'the tunnel device refused a change',
  MESHP_TUNNEL_UNAVAILABLE: 'no WireGuard implementation is available on this machine',
  MESHP_TUNNEL_MISMATCH: 'the tunnel asked for is not the one this node records (its interface and key): refused, nothing changed',
} as const;

/**
 * A command or request used wrongly (a bad flag, an argument of the wrong shape), the one the CLI
 * exits 2 for, and a change not confirmed. A refusal of what was asked, well formed, is never MESHP_USAGE.
 */
export const USAGE_CODES = {
  MESHP_USAGE: 'a command was used wrongly',
  MESHP_CONFIRM_NEEDED: 'a change was not confirmed',
} as const;

/** Every code with its meaning, one flat map. */
export const CODES = {
  ...HOST_CODES,
  ...FILE_CODES,
  ...FIREWALL_CODES,
  ...RUNTIME_CODES,
  ...SYNC_CODES,
  ...AUTH_CODES,
  ...CONTROLLER_CODES,
  ...LIFECYCLE_CODES,
  ...STORE_CODES,
  ...TUNNEL_CODES,
  ...USAGE_CODES,
} as const;

export type ErrorCode = keyof typeof CODES;
