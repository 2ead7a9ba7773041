export {
  TunnelWireguardPlugin,
  DEFAULT_GRACE_MS,
  foundationPorts,
  type TunnelWireguardOptions,
  type TunnelStatus,
  type ViewSource,
  type TunnelLog,
} from './plugin.js';
export { ensureTunnelKey, publicKeyOf, generatePrivateKey, keyToHex, keyFromHex, isTunnelKey, type TunnelKey } from './keys.js';
export { uapiGet, uapiSet, uapiCall, parseGet, socketPath, SOCKET_DIR, type DeviceState, type DevicePeer } from './uapi.js';
export { TunnelFilter, tableName, MARK } from './filter.js';
export { parsePorts, type PortMatch } from './ports.js';
export { peerConfig, endpointOf, hostRoute, upsertLines, removeLines, DEFAULT_PORT, type PeerConfig } from './peer-config.js';
export {
  uapiLines,
  parseDump,
  openDevice,
  madeMark,
  UserspaceDevice,
  KernelDevice,
  type Device,
  type DeviceChange,
  type PeerOp,
  type Implementation,
} from './device.js';
export { WireguardGo, alive } from './wireguard-go.js';
export { settingsOf, type TunnelSettings } from './settings.js';
export { tunnelOpening, withTunnelOpening } from './opening.js';
export { moveTunnel, type MovedTunnel } from './move.js';
export { leaveTunnel, type TunnelLeave } from './leave.js';
export { peerHandshakes } from './handshakes.js';
export { EndpointTrials, keepChosen, ENDPOINT_TRY_MS, HANDSHAKE_FRESH_S } from './candidates.js';
export { RelayProxy, turnCredential, type TurnCredential, type RelayProxyOptions } from './relay-proxy.js';
export { DirectTrials, DIRECT_FIRST_MS, DIRECT_CAP_MS, DIRECT_WINDOW_MS, type DirectMove, type DirectTrialOptions } from './direct-trials.js';
