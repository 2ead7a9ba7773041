/**
 * Compile-time guards, no code: core's hand-written wire and transport types (core/src/contract/
 * wire.ts, transport.ts; core imports no package, so it cannot use the generated ones) against the
 * messages generated from control.proto. A field added to the proto and not to core, or to core and
 * not to the proto, or a type changed on one side only, fails `tsc -b` here, on the guard that names
 * the pair (as Tailscale's tailcfg_view.go fails when it needs regenerating). Each `Holds<…>` reads
 * "this pair is the same shape"; none is used elsewhere.
 *
 * Where they cannot be identical, the guard says how they differ and nothing more:
 * - enums: core writes the wire numbers as `number` (an unknown number is refused, not guessed), the
 *   generated code as TypeScript enums; `Numbered<>` reads the generated type with numbers;
 * - fields core may leave out when it has nothing to say (a delta without an expected hash), where the
 *   proto has a default: `Loose<>` makes them optional on the generated side;
 * - the transport's messages the agent and controller work with in their own words (modes as
 *   'adopted' | 'converged', states as unions, "absent: not reported" where proto3 sends an empty
 *   default): `Mirrors<>` checks the same fields and the same types for every field not named as
 *   translated; codec.ts in @meshp/transport-grpc converts the translated ones, typed both ways.
 */
import type * as core from '@meshp/core';
import type * as gen from './gen/meshp/v1/control.js';

/** True when A and B are the same type, property by property (optionality and readonly included). */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Fails to compile unless T is true. */
type Holds<T extends true> = T;

type WireEnum = gen.Mode | gen.Protocol | gen.TrafficPath | gen.RemovalReason | gen.ResyncReason;
/** A generated type with its enums as the numbers core writes (contract/wire.ts: WIRE_MODE, …). */
export type Numbered<T> = T extends WireEnum
  ? number
  : T extends Uint8Array
    ? T
    : T extends (infer U)[]
      ? Numbered<U>[]
      : T extends object
        ? { [K in keyof T]: Numbered<T[K]> }
        : T;
/** T with its keys K optional: fields one side leaves out where the proto has a default. */
type Loose<T, K extends keyof T> = Flat<Omit<T, K> & Partial<Pick<T, K>>>;
type Flat<T> = { [K in keyof T]: T[K] };
/** The names of a oneof's arms (core: a union of one-key objects; generated: one optional field each). */
type Arms<U> = U extends unknown ? keyof U : never;
/**
 * Core's Core mirrors Gen: the same field names (but NotOnWire, core's own, and NotInCore, what core
 * says by a field's absence), and the same type for each field not Translated, presence aside.
 */
type Mirrors<Core, Gen, Translated extends PropertyKey = never, NotOnWire extends keyof Core = never, NotInCore extends keyof Gen = never> =
  Equal<Exclude<keyof Core, NotOnWire>, Exclude<keyof Gen, NotInCore>> extends true
    ? Equal<Required<Omit<Core, Translated | NotOnWire>>, Required<Omit<Gen, Translated | NotInCore>>>
    : false;

// The state delta and the view (contract/wire.ts): decoded messages go to core as they are, and
// core's computed deltas to the encoder, so these are the same shapes, enums as numbers.
export type WireGuards = [
  Holds<Equal<core.Peer, gen.Peer>>,
  Holds<Equal<core.PeerRemoval, Numbered<gen.PeerRemoval>>>,
  Holds<Equal<core.DnsRecord, gen.DnsRecord>>,
  Holds<Equal<core.Dns, gen.Dns>>,
  Holds<Equal<core.FilterRule, gen.FilterRule>>,
  Holds<Equal<core.Filter, gen.Filter>>,
  Holds<Equal<core.RouteGroup, gen.RouteGroup>>,
  Holds<Equal<core.RouteGroups, gen.RouteGroups>>,
  Holds<Equal<core.Relay, gen.Relay>>,
  Holds<Equal<core.Relays, gen.Relays>>,
  Holds<Equal<core.Tunnel, gen.Tunnel>>,
  Holds<Equal<core.WireSettings, gen.Settings>>,
  Holds<Equal<core.WireFileSpec, gen.FileSpec>>,
  Holds<Equal<core.WirePortSpec, Numbered<gen.PortSpec>>>,
  Holds<Equal<core.WireMountSpec, gen.MountSpec>>,
  Holds<Equal<core.WireContainerSpec, Numbered<gen.ContainerSpec>>>,
  Holds<Equal<core.WireOpeningSpec, Numbered<gen.OpeningSpec>>>,
  Holds<Equal<core.WireModuleDecl, Numbered<gen.ModuleDecl>>>,
  Holds<Equal<core.WireModuleUntake, gen.ModuleUntake>>,
  Holds<Equal<core.WireDeclaration, Numbered<gen.Declaration>>>,
  Holds<Equal<core.DeltaPart, gen.DeltaPart>>,
  Holds<Equal<core.Components, Numbered<Pick<gen.StateDelta, core.ComponentName>>>>,
  // A delta core computed says its expected hash and carries the signature once it has them; the
  // transport sends '' and empty bytes for what it leaves out (codec.ts, controllerToWire).
  Holds<Equal<core.StateDelta, Loose<Numbered<gen.StateDelta>, 'stateHash' | 'versionSignature'>>>,
];

type ControllerArm<K extends Arms<core.ControllerMessage>> = Extract<core.ControllerMessage, Record<K, unknown>>[K];

// The Sync stream's and Enrol's messages (contract/transport.ts).
export type TransportGuards = [
  Holds<Equal<Arms<core.AgentMessage>, keyof gen.SyncRequest>>,
  Holds<Equal<Arms<core.ControllerMessage>, keyof gen.SyncResponse>>,
  Holds<Equal<ControllerArm<'challenge'>, gen.Challenge['nonce']>>,
  Holds<Equal<ControllerArm<'error'>, gen.SyncError>>,
  Holds<Equal<ControllerArm<'delta'>, core.StateDelta>>,
  Holds<Equal<core.EnrolInput, gen.EnrolRequest>>,
  // mode: 'adopted' | 'converged' in core, the wire's number in the proto (modeToWire / modeFromWire).
  Holds<Mirrors<core.EnrolResult, gen.EnrolResponse, 'mode'>>,
  // An agent that keeps no version signature sends empty bytes; one from before issue 28 says nothing of expiry (false); one that asks for no exit node, ''.
  Holds<Equal<core.HelloMessage, Loose<gen.Hello, 'versionSignature' | 'expiryAware' | 'exitNode'>>>,
  Holds<Equal<core.AckMessage, gen.StateAck>>,
  Holds<Equal<core.ResyncMessage, Numbered<gen.ResyncRequest>>>,
  // The report: what core leaves out is "not reported"; peerHandshakes absent is handshakesReported false.
  Holds<
    Mirrors<
      core.ReportMessage,
      gen.Report,
      'mode' | 'resources' | 'listening' | 'lifecycle' | 'reconcile' | 'pluginOpenings' | 'dns' | 'forwarding' | 'peerHandshakes' | 'untakes',
      never,
      'handshakesReported'
    >
  >,
  // The resolver: where its list came from is a union in core, a string on the wire; no error is null in core, '' on the wire.
  Holds<Mirrors<core.ResolverReport, gen.ResolverStatus, 'upstreamsFrom' | 'lastError'>>,
  // kind and state: core's unions, strings on the wire.
  Holds<Mirrors<core.ResourceReport, gen.ResourceStatus, 'kind' | 'state'>>,
  Holds<Mirrors<NonNullable<core.ReportMessage['listening']>[number], gen.ListeningSocket>>,
  Holds<Equal<NonNullable<core.ReportMessage['applied']>[number], gen.AppliedDelta>>,
  Holds<Equal<NonNullable<core.ReportMessage['published']>[number], gen.PublishedPort>>,
  Holds<Equal<NonNullable<core.ReportMessage['reach']>[number], gen.DoorReach>>,
  // endpoint and path absent in core are '' on the wire; path a union in core.
  Holds<Mirrors<core.PeerHandshake, gen.PeerHandshake, 'path'>>,
  Holds<Mirrors<core.LifecycleReport, gen.Lifecycle, 'state'>>,
  Holds<Mirrors<core.ReconcileOutcome, gen.ReconcileOutcome, 'result'>>,
  // issue 29: an untake preview passes as it is; an outcome's result is a union in core.
  Holds<Equal<core.UntakePreviewReport, gen.UntakePreview>>,
  Holds<Mirrors<core.UntakeOutcomeReport, gen.UntakeOutcome, 'result'>>,
  // A plugin's opening: protocol, path and action are unions in core, strings on the wire; except is
  // a refusal's, never reported.
  Holds<Mirrors<core.Opening, gen.PlannedOpening, 'protocol' | 'path' | 'action', 'except'>>,
  // A plugin's other change to the converged plan: words on both sides.
  Holds<Equal<core.PlannedChange, gen.PlannedChange>>,
];
