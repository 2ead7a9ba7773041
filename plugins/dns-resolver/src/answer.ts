/**
 * One query answered from the name table, encoded and decoded by dns-packet (no DNS wire format is
 * written here). A name of the mesh's domain is answered with authority: its addresses, a CNAME
 * followed within the mesh, NODATA for a type it has none of, NXDOMAIN for a name it does not hold.
 */
import dnsPacket, { type Answer, type Packet, type Question } from 'dns-packet';
import { inDomain, type NameTable } from './names.js';

/** Seconds a mesh answer may be cached: short, so a policy change is seen at once by a caching client. */
export const MESH_TTL = 5;
const RCODE = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export type Outcome = 'answered' | 'nodata' | 'nxdomain' | 'forwarded' | 'servfail' | 'refused' | 'malformed';

export interface Answered {
  outcome: Outcome;
  bytes: Buffer;
}

function response(query: Packet, rcode: number, answers: Answer[], authoritative: boolean): Buffer {
  const rd = (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED;
  const flags = rd | dnsPacket.RECURSION_AVAILABLE | (authoritative ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | rcode;
  return dnsPacket.encode({ type: 'response', id: query.id ?? 0, flags, questions: query.questions ?? [], answers });
}

/** A refusal of what could not be read as a query: SERVFAIL with the id, when even that is there. */
export function failure(raw: Buffer, rcode: 'SERVFAIL' | 'REFUSED' = 'SERVFAIL'): Buffer {
  const id = raw.length >= 2 ? raw.readUInt16BE(0) : 0;
  return dnsPacket.encode({ type: 'response', id, flags: dnsPacket.RECURSION_AVAILABLE | RCODE[rcode], questions: [] });
}

/** Decoded, or null: the caller answers SERVFAIL (or drops it, over UDP). */
export function decodeQuery(raw: Buffer): Packet | null {
  try {
    const p = dnsPacket.decode(raw);
    return p.type === 'query' ? p : null;
  } catch {
    return null;
  }
}

/** The answers for one question of the mesh's domain: null when the name is not held. */
function meshAnswers(table: NameTable, q: Question): Answer[] | null {
  const out: Answer[] = [];
  let name = q.name.toLowerCase().replace(/\.$/, '');
  // A chain of CNAMEs within the mesh, followed at most 8 deep (a loop ends there).
  for (let hop = 0; hop < 8; hop++) {
    const e = table.names.get(name);
    if (!e) return hop === 0 ? (name === table.domain ? [] : null) : out;
    if (e.cname) {
      out.push({ type: 'CNAME', name, ttl: MESH_TTL, class: 'IN', data: e.cname });
      if (q.type === 'CNAME' || !inDomain(table, e.cname)) return out;
      name = e.cname;
      continue;
    }
    const type: string = q.type;
    if (type === 'A' || type === 'ANY') for (const a of e.a) out.push({ type: 'A', name, ttl: MESH_TTL, class: 'IN', data: a });
    if (type === 'AAAA' || type === 'ANY') for (const a of e.aaaa) out.push({ type: 'AAAA', name, ttl: MESH_TTL, class: 'IN', data: a });
    return out;
  }
  return out;
}

/** The answer to a query whose question is of the mesh's domain. */
export function answerMesh(table: NameTable, query: Packet): Answered {
  const q = query.questions?.[0];
  if (!q) return { outcome: 'malformed', bytes: response(query, RCODE.SERVFAIL, [], false) };
  const answers = meshAnswers(table, q);
  if (answers === null) return { outcome: 'nxdomain', bytes: response(query, RCODE.NXDOMAIN, [], true) };
  return { outcome: answers.length ? 'answered' : 'nodata', bytes: response(query, RCODE.NOERROR, answers, true) };
}

/** The rcode of a response read back (for the counters), or null. */
export function rcodeOf(raw: Buffer): string | null {
  try {
    // dns-packet decodes the rcode; its published types do not list it.
    return (dnsPacket.decode(raw) as { rcode?: string }).rcode ?? null;
  } catch {
    return null;
  }
}
