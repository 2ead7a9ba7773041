/**
 * Hash agreement across protocol revisions. An agent hashes the view as its own decoder reads it:
 * a field added to a state component in a later revision is dropped by an older agent's decoder, so
 * its hash differs from one over every field. The controller therefore computes the hash each agent
 * is expected to ack over only the fields that agent's revision (Hello.revision) knows — chosen over
 * a hash of bytes with unknown fields kept, because the generated decoders (ts-proto, and most
 * others) do not keep unknown fields, and over agents ignoring new fields in the hash, because a
 * revision that knows a field must have it checked.
 *
 * Revisions: 1 = v1-r1 (proto/released) and every agent before issue 14; 2 = v1-r2 (this file's
 * control.proto: Declaration.converge_preview_id, StateDelta.state_hash/version_signature, …); 3 =
 * v1-r3 (Dns.domain, Dns.splits, DnsRecord.cname: issue 25); 4 = v1-r4 (Relay.transport, username,
 * password, expires: issue 27); 5 = v1-r5 (RouteGroup.no_masquerade: issue 26, ADR 0038).
 */
import type { Dns, Relays, RouteGroups, WireDeclaration } from '../contract/wire.js';

// The revision this end speaks is PROTOCOL_REVISION (contract/transport.ts), one constant for the
// agent's Hello and the controller's hash.

/** The declaration as a revision-`revision` agent decodes it: the fields it does not know, at their default. */
export function declarationForRevision(d: WireDeclaration, revision: number): WireDeclaration {
  if (revision >= 2) return d;
  return { ...d, convergePreviewId: '' };
}

/** The DNS component as a revision-`revision` agent decodes it: before 3, no domain, no splits, no CNAME target. */
export function dnsForRevision(d: Dns, revision: number): Dns {
  if (revision >= 3) return d;
  return { ...d, domain: '', splits: [], records: d.records.map((r) => ({ ...r, cname: '' })) };
}

/** The relays component as a revision-`revision` agent decodes it: before 4, no transport and no credential. */
export function relaysForRevision(r: Relays, revision: number): Relays {
  if (revision >= 4) return r;
  return { relays: r.relays.map((x) => ({ ...x, transport: '', username: '', password: '', expires: 0 })) };
}

/** The route groups as a revision-`revision` agent decodes them: before 5, no `noMasquerade`. */
export function routeGroupsForRevision(r: RouteGroups, revision: number): RouteGroups {
  if (revision >= 5) return r;
  return { groups: r.groups.map((g) => ({ ...g, noMasquerade: false })) };
}
