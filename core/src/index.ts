/**
 * `@meshp/core`: what a plugin author writes against, and nothing else.
 *
 * The root holds three things:
 * - the contract: the hooks, what a plugin is handed and every object it may provide
 *   (contracts.ts), `PLUGIN_API_VERSION` (the `apiVersion` a plugin states), the tap stages, the
 *   container labels, and the typed admin map (contract/); with, as types only, the shapes the
 *   contract names (the transport's messages in agent/transport.ts, the wire's in delta/wire.ts);
 * - the errors: `MeshpError`, its stable `MESHP_…` codes, `isMeshpError`;
 * - the model: declarations, modules, openings, resource kinds and their keys (model.ts).
 *
 * `apiVersion` covers exactly this. Helpers are under subpaths, each with its own index:
 * `@meshp/core/host` (the Host class, for assemblers), `/agent`, `/delta` (both halves of the delta
 * protocol), `/reconcile`, `/lifecycle`, `/catalogue`, `/schema`, `/net`, `/util`.
 * test/unit/core-exports.test.ts fails when a runtime name is added here: add it to a subpath, or
 * to that test's list with the reason it belongs to the contract, the errors or the model.
 */
export * from './model.js';
export { CODES, MeshpError, isMeshpError, type ErrorCode, type Attribution } from './errors.js';
export * from './contracts.js';
export * from './contract/admin.js';
export type * from './agent/transport.js';
export type * from './delta/wire.js';
