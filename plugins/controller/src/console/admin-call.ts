/**
 * The console reads and changes the controller only through its Admin API, the handler the gRPC
 * transport serves, called in this process: the same credential check, the same catch-up on a shared
 * store, the same log line per call as a CLI user's call.
 */
import type { AdminHandler } from '@meshp/core';
import type { AdminAnswer, AdminMethod, AdminRequest } from '@meshp/protocol';

/** One Admin call with the credential of the session that asks (kept server side, never sent to a page). */
export type ConsoleAdmin = <M extends AdminMethod>(method: M, request: Partial<AdminRequest<M>>) => Promise<AdminAnswer<M>>;

export function consoleAdmin(handler: AdminHandler, credential: string, peer: string): ConsoleAdmin {
  return <M extends AdminMethod>(method: M, request: Partial<AdminRequest<M>>) => handler(method, request, credential, peer) as Promise<AdminAnswer<M>>;
}
