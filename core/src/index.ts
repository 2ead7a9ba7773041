/**
 * `@meshp/core`: what a plugin author writes against, and nothing else.
 *
 * The root is the contract room, core/src/contract/, and the errors:
 * - the plugin contract: the hooks, what a plugin is handed and the stages per hook (plugin.ts),
 *   every object it may provide (providers.ts), the plan and the report (plan.ts),
 *   `PLUGIN_API_VERSION` (the `apiVersion` a plugin states), the container labels;
 * - the typed admin map (admin.ts);
 * - as types only: the transport contract (transport.ts), the wire's shapes (wire.ts) and the
 *   controller's store seam (store.ts); their constants and helpers are under the subpaths that use
 *   them (`/agent`, `/delta`, `/store`);
 * - the model: declarations, modules, openings, resource kinds and their keys (model.ts);
 * - the errors: `MeshpError`, its stable `MESHP_…` codes, `isMeshpError`.
 *
 * `apiVersion` covers exactly this. Helpers are under subpaths, each with its own index:
 * `@meshp/core/host` (the Host class, for assemblers), `/agent`, `/delta` (the shared half, the
 * agent half and the controller half of the delta protocol), `/reconcile`, `/lifecycle`,
 * `/catalogue`, `/schema`, `/net`, `/store`, `/util`.
 * test/unit/core-exports.test.ts fails when a runtime name is added here: add it to a subpath, or
 * to that test's list with the reason it belongs to the contract, the errors or the model.
 */
export * from './contract/model.js';
export { CODES, MeshpError, isMeshpError, type ErrorCode, type Attribution } from './errors.js';
export * from './contract/plugin.js';
export * from './contract/providers.js';
export * from './contract/plan.js';
export * from './contract/admin.js';
export type * from './contract/transport.js';
export type * from './contract/wire.js';
export type * from './contract/store.js';
export type * from './contract/admin-credentials.js';
