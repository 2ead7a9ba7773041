export { DnsResolverPlugin, DEFAULT_DNS_PORT, type DnsResolverOptions, type DnsResolverStatus, type ResolverLog } from './plugin.js';
export { nameTable, patchTable, inDomain, NAMED_COMPONENTS, type NameTable, type NameEntry, type NamedView } from './names.js';
export { nameserversOf, foundNameservers, resolvConfPath } from './resolv-conf.js';
export { dnsOpenings, withDnsOpenings, DNS_MODULE } from './opening.js';
export { MESH_TTL } from './answer.js';
export { integratorFor, resolvconfEntry, DEFAULT_COMMANDS, HELD_PREFIX, type ManagerCommands, type MeshLink } from './integrate.js';
export { detectManager } from './manager.js';
export { localRunner, type Runner, type RunResult } from './run.js';
export { managedText, resolvConfAction, restoreOriginal, ORIGINAL_KEY, RESOLV_CONF_PATH, type RecordedOriginal } from './managed-file.js';
