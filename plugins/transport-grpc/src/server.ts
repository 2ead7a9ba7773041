/** The controller's side: Control and Admin services on one TLS port. */
import {
  Server,
  ServerCredentials,
  status as Status,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type UntypedHandleCall,
} from '@grpc/grpc-js';
import {
  MeshpError,
  type AdminHandler,
  type Refused,
  type Unencodable,
  type AgentMessage,
  type ControlHandlers,
  type ControllerMessage,
  type ListenOptions,
  type TransportListener,
} from '@meshp/core';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import { agentFromWire, controllerToWire, enrolToWire } from './codec.js';
import { encodeDeltaResponse } from './delta-encode.js';
import { StreamChannel } from './channel.js';
import * as gen from '@meshp/protocol';
import { serverOptions } from './options.js';
import { toStatus, transportError } from './status.js';

type Fns = { fromPartial(o: object): object };

/** Admin method (the generated service's key) → the message its answer is built with. */
const ADMIN_RESPONSES: Record<keyof typeof gen.AdminServiceService, Fns> = {
  listNodes: gen.ListNodesResponse,
  showNode: gen.ShowNodeResponse,
  assignModule: gen.AssignModuleResponse,
  unassignModule: gen.UnassignModuleResponse,
  takeModule: gen.TakeModuleResponse,
  setMode: gen.SetModeResponse,
  setPolicy: gen.SetPolicyResponse,
  createToken: gen.CreateTokenResponse,
  doctor: gen.DoctorResponse,
  addCatalogue: gen.AddCatalogueResponse,
  previewConverge: gen.PreviewConvergeResponse,
  convergeNode: gen.ConvergeNodeResponse,
  removeNode: gen.RemoveNodeResponse,
  renameNode: gen.RenameNodeResponse,
  setTags: gen.SetTagsResponse,
  expireNode: gen.ExpireNodeResponse,
  renewNode: gen.RenewNodeResponse,
  getNodeLifetime: gen.GetNodeLifetimeResponse,
  setNodeLifetime: gen.SetNodeLifetimeResponse,
  rekeyNode: gen.RekeyNodeResponse,
  createNetwork: gen.CreateNetworkResponse,
  listNetworks: gen.ListNetworksResponse,
  removeNetwork: gen.RemoveNetworkResponse,
  listCatalogue: gen.ListCatalogueResponse,
  showCatalogueModule: gen.ShowCatalogueModuleResponse,
  removeCatalogueModule: gen.RemoveCatalogueModuleResponse,
  listEnrolmentTokens: gen.ListEnrolmentTokensResponse,
  revokeEnrolmentToken: gen.RevokeEnrolmentTokenResponse,
  getPolicy: gen.GetPolicyResponse,
  previewPolicy: gen.PreviewPolicyResponse,
  testPolicy: gen.TestPolicyResponse,
  listAudit: gen.ListAuditResponse,
  getDns: gen.GetDnsResponse,
  setDns: gen.SetDnsResponse,
  listRouteGroups: gen.ListRouteGroupsResponse,
  setRouteGroup: gen.SetRouteGroupResponse,
  removeRouteGroup: gen.RemoveRouteGroupResponse,
  approveRoute: gen.ApproveRouteResponse,
  listRelays: gen.ListRelaysResponse,
  setRelay: gen.SetRelayResponse,
  removeRelay: gen.RemoveRelayResponse,
  setExitNode: gen.SetExitNodeResponse,
  createAdmin: gen.CreateAdminResponse,
  listAdmins: gen.ListAdminsResponse,
  revokeAdmin: gen.RevokeAdminResponse,
  whoAmI: gen.WhoAmIResponse,
  previewUntake: gen.PreviewUntakeResponse,
  untakeModule: gen.UntakeModuleResponse,
  releaseModule: gen.ReleaseModuleResponse,
};

export const ADMIN_METHODS = Object.keys(ADMIN_RESPONSES) as (keyof typeof gen.AdminServiceService)[];

const STATUS_OF: Record<string, Status> = {
  MESHP_TOKEN_INVALID: Status.UNAUTHENTICATED,
  MESHP_AUTH_FAILED: Status.UNAUTHENTICATED,
  MESHP_FORBIDDEN: Status.PERMISSION_DENIED,
  MESHP_MESSAGE_TOO_LARGE: Status.RESOURCE_EXHAUSTED,
  MESHP_MESSAGE_MALFORMED: Status.INVALID_ARGUMENT,
  MESHP_RATE_LIMITED: Status.RESOURCE_EXHAUSTED,
};

/** A Sync stream ended by the controller with a coded error (one function for every stream, not a closure each). */
function failStream(s: unknown, e: { code: string; message: string }): void {
  (s as ServerDuplexStream<gen.SyncRequest, gen.SyncResponse>).emit('error', { code: STATUS_OF[e.code] ?? Status.ABORTED, details: `${e.code}: ${e.message}` });
}

function credentialOf(call: ServerUnaryCall<unknown, unknown>): string {
  const v = call.metadata.get('authorization')[0];
  const s = typeof v === 'string' ? v : v ? v.toString('utf8') : '';
  return s.replace(/^Bearer\s+/i, '');
}

/**
 * Messages over the limit: grpc-js itself refuses beyond twice the limit (a bound on what is
 * buffered), without telling the application; up to there, the service definitions below hand the
 * handlers a marker instead, so the refusal is coded, answered and reported like any other.
 */
const OVERSIZED = Symbol('oversized');
type Oversized = { [OVERSIZED]: number };
const isOversized = (m: unknown): m is Oversized => typeof m === 'object' && m !== null && OVERSIZED in m;

/**
 * Bytes that do not decode: grpc-js would end the call with INTERNAL "Error deserializing request",
 * uncoded and unlogged; the handlers get a marker instead and answer MESHP_MESSAGE_MALFORMED.
 */
const MALFORMED = Symbol('malformed');
type Malformed = { [MALFORMED]: string };
const isMalformed = (m: unknown): m is Malformed => typeof m === 'object' && m !== null && MALFORMED in m;

type ServiceDef = Record<string, { requestDeserialize: (b: Buffer) => unknown; responseSerialize: (v: never) => Buffer }>;

/**
 * An answer that does not encode: grpc-js ends the call with INTERNAL "Error serializing response",
 * unlogged, and an agent whose delta cannot be encoded reconnects into the same failure for ever.
 * Each answer's encoder is wrapped so the failure is told (`unencodable`) before grpc-js ends the call.
 */
function told<S extends ServiceDef>(service: S, unencodable: Unencodable | undefined): S {
  if (!unencodable) return service;
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(service)) {
    out[name] = {
      ...def,
      responseSerialize: (v: never): Buffer => {
        try {
          return def.responseSerialize(v);
        } catch (e) {
          const delta = (v as { delta?: { network?: string; declaration?: { node?: string } } }).delta;
          unencodable({
            method: name,
            message: e instanceof Error ? e.message : String(e),
            ...(delta?.network ? { network: delta.network } : {}),
            ...(delta?.declaration?.node ? { node: delta.declaration.node } : {}),
          });
          throw e;
        }
      },
    };
  }
  return out as S;
}

function limited<S extends ServiceDef>(service: S, max: number): S {
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(service)) {
    const decode = (b: Buffer): unknown => {
      try {
        return def.requestDeserialize(b);
      } catch (e) {
        return { [MALFORMED]: `${b.length} bytes that are not a ${name} request (${e instanceof Error ? e.message : String(e)})` };
      }
    };
    out[name] = { ...def, requestDeserialize: (b: Buffer) => (b.length > max ? { [OVERSIZED]: b.length } : decode(b)) };
  }
  return out as S;
}

function malformed(m: Malformed): MeshpError {
  return new MeshpError('MESHP_MESSAGE_MALFORMED', m[MALFORMED]);
}

function tooLarge(m: Oversized, max: number): MeshpError {
  return new MeshpError('MESHP_MESSAGE_TOO_LARGE', `a message of ${m[OVERSIZED]} bytes is over the ${max}-byte limit`);
}

type Services = { control: ControlHandlers; admin: AdminHandler; refused?: Refused; unencodable?: Unencodable };
/** Reports a refusal the transport made itself (to the controller's log and metrics) and hands it back to answer with. */
type Refuse = (method: string, peer: string, e: MeshpError) => MeshpError;

export async function listen(options: ListenOptions, services: Services): Promise<TransportListener> {
  const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const server = new Server(serverOptions(max));
  const refuse: Refuse = (method, peer, e) => {
    services.refused?.({ method, peer, code: e.code, message: e.message });
    return e;
  };
  server.addService(limited(told(countedControl(services), services.unencodable), max), controlService(services, max, refuse));
  server.addService(limited(told(gen.AdminServiceService, services.unencodable), max), adminService(services, max, refuse));
  const port = await bind(server, options);
  return listenerOf(server, `${options.address.replace(/:\d+$/, '')}:${port}`);
}

/** Enrol and Sync: refused before the handlers when oversized or malformed, in the contract's shapes after. */
function controlService(services: Services, max: number, refuse: Refuse): gen.ControlServiceServer {
  return {
    enrol: (call: ServerUnaryCall<gen.EnrolRequest, gen.EnrolResponse>, cb: sendUnaryData<gen.EnrolResponse>) => {
      if (isOversized(call.request)) return cb(toStatus(refuse('Enrol', call.getPeer(), tooLarge(call.request, max))));
      if (isMalformed(call.request)) return cb(toStatus(refuse('Enrol', call.getPeer(), malformed(call.request))));
      services.control.enrol(call.request, call.getPeer()).then(
        (r) => cb(null, enrolToWire(r)),
        (e) => cb(toStatus(e)),
      );
    },
    sync: (call: ServerDuplexStream<gen.SyncRequest, gen.SyncResponse>) => {
      const ch = new StreamChannel<AgentMessage, ControllerMessage, gen.SyncRequest, gen.SyncResponse>(
        {
          in: (w) => {
            if (isOversized(w)) throw refuse('Sync', call.getPeer(), tooLarge(w, max));
            if (isMalformed(w)) throw refuse('Sync', call.getPeer(), malformed(w));
            return agentFromWire(w);
          },
          out: controllerToWire,
        },
        transportError,
        failStream,
      );
      ch.attach(call);
      services.control.sync(ch, call.getPeer());
    },
  };
}

/** The Control service's definition with each StateDelta's size taken where grpc-js encodes it: the bytes that go on the wire, not an estimate. */
function countedControl(services: Services) {
  const syncDef = gen.ControlServiceService.sync;
  return {
    ...gen.ControlServiceService,
    sync: {
      ...syncDef,
      // A delta: what every agent's delta shares encoded once (delta-encode.ts, the same bytes).
      responseSerialize: (v: gen.SyncResponse): Buffer => {
        if (!v.delta || v.challenge || v.error) return syncDef.responseSerialize(v);
        const b = encodeDeltaResponse(v.delta);
        services.control.deltaBytes?.(b.length);
        return b;
      },
    },
  };
}

/** Every Admin method: refused before the handler when oversized or malformed; its answer filled with the proto's defaults. */
function adminService(services: Services, max: number, refuse: Refuse): Record<string, UntypedHandleCall> {
  const admin: Record<string, UntypedHandleCall> = {};
  for (const method of ADMIN_METHODS) {
    admin[method] = (call: ServerUnaryCall<Record<string, unknown>, object>, cb: sendUnaryData<object>) => {
      if (isOversized(call.request)) return cb(toStatus(refuse(method, call.getPeer(), tooLarge(call.request, max))));
      if (isMalformed(call.request)) return cb(toStatus(refuse(method, call.getPeer(), malformed(call.request))));
      services.admin(method, call.request, credentialOf(call), call.getPeer()).then(
        (r) => cb(null, ADMIN_RESPONSES[method].fromPartial(r)),
        (e) => cb(toStatus(e)),
      );
    };
  }
  return admin;
}

/** The TLS port, bound: the port actually taken (port 0 picks a free one). */
function bind(server: Server, options: ListenOptions): Promise<number> {
  const creds = ServerCredentials.createSsl(null, [{ private_key: Buffer.from(options.keyPem), cert_chain: Buffer.from(options.certPem) }], false);
  return new Promise<number>((resolve, reject) => {
    server.bindAsync(options.address, creds, (err, p) =>
      err ? reject(new MeshpError('MESHP_UNAVAILABLE', `cannot listen on ${options.address}: ${err.message}`, { cause: err })) : resolve(p),
    );
  });
}

/** Closing lets calls in flight finish, for 2 s at most, then ends them. */
function listenerOf(server: Server, address: string): TransportListener {
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
