export { GrpcTransport, GrpcTransportPlugin } from './plugin.js';
export { GrpcControlLink } from './client.js';
export { AdminClient, type AdminConnectOptions } from './admin-client.js';
export { listen, ADMIN_METHODS } from './server.js';
export { fetchPinnedCertificate, pinnedCredentials } from './pin.js';
export { channelOptions, serverOptions } from './options.js';
export { fromStatus, toStatus } from './status.js';
export * as wire from '@meshp/protocol';
export type { AdminApi, AdminMethod, AdminRequest, AdminResponse, AdminAnswer } from '@meshp/protocol';
