/**
 * The admin API of control.proto as a typed map (core's AdminMap): method → its request and answer,
 * derived from the generated service, so the proto is the one source. The controller serves it
 * (`AdminMethods<AdminApi>`: every method, each with its own shapes) and the CLI calls it through
 * `AdminClient.call`, both without casts.
 */
import type * as gen from './gen/meshp/v1/control.js';

type Service = typeof gen.AdminServiceService;
export type AdminMethod = keyof Service & string;
export type AdminRequest<M extends AdminMethod> = Parameters<Service[M]['requestSerialize']>[0];
export type AdminResponse<M extends AdminMethod> = ReturnType<Service[M]['responseDeserialize']>;
/** What a handler answers: the transport fills what it leaves out with the proto's defaults (fromPartial). */
export type AdminAnswer<M extends AdminMethod> = gen.DeepPartial<AdminResponse<M>>;

export type AdminApi = { [M in AdminMethod]: { request: AdminRequest<M>; response: AdminAnswer<M> } };
