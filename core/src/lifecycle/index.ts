export {
  buildPreview,
  checkLiveDoors,
  closingDoors,
  convergedOpenings,
  doorOf,
  liveDoorsClosing,
  pluginOpeningsOf,
  previewDoors,
  type ConvergePreview,
  type PreviewItem,
  type PreviewInputs,
  type AfterFlip,
  type NowReach,
} from './preview.js';
export {
  NO_FILTER,
  flip,
  noFilter,
  pluginOpeningsOfNode,
  pluginPlanOfNode,
  previewConverge,
  reachOf,
  returnToAdopted,
  MODE_KEY,
  type FlipResult,
  type RetiredRecord,
  type Progress,
} from './flip.js';
export { changeStep, pluginChangesOf } from './preview-changes.js';
// A preview's rows as the CLI and the console show them.
export { PREVIEW_COLUMNS, afterShown, nowShown, previewRows } from './preview-rows.js';
// The firewall half of the return, also a leaving node's (core/src/agent/leave.ts).
export { restoreFound } from './flip.js';
export { checkGenesis, type GenesisFacts, type GenesisFinding, type GenesisInput } from './genesis-checks.js';
export { managersEnabledRead, managersRunning, managersRunningRead, managersSeen, type ManagerSeen, type NetOf } from './managers.js';
export { networkManagerDns, type NetworkManagerDns } from './networkmanager.js';
export { RESOLVER_MANAGER_KINDS, RESOLV_CONF, resolverManagerSeen, type ResolverManagerKind, type ResolverManagerSeen } from './resolver-managers.js';
