/**
 * A SyncResponse carrying a StateDelta, encoded with what every agent's delta shares encoded once
 * (issue 31, ADR 0044). In a join every agent's delta carries the same new peer; only the version,
 * state hash and tag fields differ. A peer image the controller shares (core's `sharedPeer`) is
 * frozen: its encoding is kept by identity (a WeakMap, gone with the image) and written as the
 * length-delimited bytes it is, the rest of the delta field by field as the generated encoder
 * writes it. The bytes are those of `SyncResponse.encode({ delta })` (test/unit/delta-encode.test.ts).
 */
import * as gen from '@meshp/protocol';

/** Encoded Peer messages, by the frozen image they encode. */
const peers = new WeakMap<object, Uint8Array>();

function peerBytes(p: gen.Peer): Uint8Array | null {
  if (!Object.isFrozen(p)) return null;
  let b = peers.get(p);
  if (!b) peers.set(p, (b = gen.Peer.encode(p).finish()));
  return b;
}

/** `SyncResponse.encode({ delta: d })`, field for field, each frozen peer's bytes encoded once. */
export function encodeDeltaResponse(d: gen.StateDelta): Buffer {
  const w = new gen.BinaryWriter();
  w.uint32(10).fork();
  if (d.fromVersion !== 0) w.uint32(8).uint64(d.fromVersion);
  if (d.toVersion !== 0) w.uint32(16).uint64(d.toVersion);
  for (const p of d.upsertPeers) {
    const b = peerBytes(p);
    if (b) w.uint32(26).bytes(b);
    else gen.Peer.encode(p, w.uint32(26).fork()).join();
  }
  for (const r of d.removePeers) gen.PeerRemoval.encode(r, w.uint32(34).fork()).join();
  if (d.dns !== undefined) gen.Dns.encode(d.dns, w.uint32(42).fork()).join();
  if (d.filter !== undefined) gen.Filter.encode(d.filter, w.uint32(50).fork()).join();
  if (d.routeGroups !== undefined) gen.RouteGroups.encode(d.routeGroups, w.uint32(58).fork()).join();
  if (d.relays !== undefined) gen.Relays.encode(d.relays, w.uint32(66).fork()).join();
  if (d.tunnel !== undefined) gen.Tunnel.encode(d.tunnel, w.uint32(74).fork()).join();
  if (d.declaration !== undefined) gen.Declaration.encode(d.declaration, w.uint32(82).fork()).join();
  if (d.network !== '') w.uint32(90).string(d.network);
  if (d.part !== undefined) gen.DeltaPart.encode(d.part, w.uint32(98).fork()).join();
  if (d.stateHash !== '') w.uint32(402).string(d.stateHash);
  if (d.versionSignature.length !== 0) w.uint32(410).bytes(d.versionSignature);
  w.join();
  const u = w.finish();
  // The writer's own buffer, not a copy (the generated serializer's Buffer.from copies it).
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
