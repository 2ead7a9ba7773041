export type { KitTest, Teardown } from './kit-test.js';
export { ADDRESSES, lab, labUnavailable, type KitLab, type Namespace } from './lab.js';
export { FOUND_PORT, KIT_OPENING, MESH_PORT, firewallConformance, type FirewallCheck, type FirewallKitBed, type FirewallKitSpec } from './firewall.js';
export { fileStoreConformance, type FileStoreKitSpec } from './files.js';
export { runtimeConformance, type RuntimeCheck, type RuntimeKitEngine, type RuntimeKitSpec } from './runtime.js';
export { standalone } from './standalone.js';
