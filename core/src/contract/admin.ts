/**
 * The admin API as a typed map: method name → what it is asked and what it answers. The map itself
 * comes from the transport's message definitions (the gRPC transport derives `AdminApi` from
 * control.proto), so a method added to the proto is a compile error in every handler map until it
 * is served.
 */

/** One admin method: its request and its answer. */
export interface AdminCall {
  request: object;
  response: object;
}

/** Method name → its call. */
export type AdminMap = { [method: string]: AdminCall };

/**
 * One handler per method of A, each typed by its own request and answer: a map missing a method,
 * or answering one with another's shape, does not compile. `network` is the request's, or the default.
 */
export type AdminMethods<A extends AdminMap> = { [M in keyof A & string]: (request: A[M]['request'], network: string) => A[M]['response'] };

/**
 * The Admin service as a transport calls it: by method name, with the request the transport decoded
 * by that method's message type. `credential` is what the caller presented, `peer` names it for logs.
 */
export type AdminHandler = (method: string, request: object, credential: string, peer: string) => Promise<object>;

/**
 * The one place a request leaves the transport's untyped dispatch: the method is checked to be one of
 * the map's, and the request was decoded by the transport with that method's message type. Answers
 * `undefined` for a method the map does not have.
 */
export function adminMethod<A extends AdminMap>(methods: AdminMethods<A>, method: string): ((request: object, network: string) => object) | undefined {
  if (!Object.hasOwn(methods, method)) return undefined;
  const fn = methods[method as keyof A & string];
  return (request, network) => fn(request as A[keyof A & string]['request'], network);
}
