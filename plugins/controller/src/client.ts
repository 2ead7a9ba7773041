/**
 * `@meshp/controller/client`: what a client of a controller (the CLI's admin commands) needs from
 * this package — the state folder's names and the admin credential — without loading the
 * controller itself (its store, hosting and console: fastify and the rest). A `meshp node list`
 * then starts in the time of the gRPC client alone.
 */
export { ADDRESS_FILE, DEFAULT_NETWORK } from './hosting/names.js';
export { ADMIN_CREDENTIAL_FILE, parseAdminCredential, readAdminCredential, type AdminCredential } from './hosting/credential.js';
