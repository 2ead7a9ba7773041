/**
 * Bounds on what an operator or a node may put into the controller, checked at the change that
 * would bring it in (enrolment, catalogue add, policy set, module assign), so that no node's
 * snapshot can grow past what one message carries and then be sent and refused forever.
 *
 * The bounds are sized so that a node's own share of any snapshot is small: a peer entry is at most
 * ~20 KiB (endpoints, tags, addresses), the modules assigned to one node at most MAX_ASSIGNED_BYTES,
 * and the sender packs peers into messages by size (splitForWire), so a snapshot of any number of
 * peers goes in parts each under the message limit.
 */
import { MeshpError, type StateDelta } from '@meshp/core';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import type { ModuleDef, PolicyRule } from '@meshp/core/delta';
import * as wire from '@meshp/protocol';

export const LIMITS = {
  nameChars: 63,
  endpoints: 32,
  endpointChars: 255,
  tags: 64,
  tagChars: 63,
  fileBytes: 1024 * 1024,
  moduleBytes: 1024 * 1024,
  assignedBytes: 2 * 1024 * 1024,
  policyRules: 1_000,
  policyBytes: 256 * 1024,
} as const;

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8');

function refuse(what: string): never {
  throw new MeshpError('MESHP_INPUT_TOO_LARGE', what);
}

function checkName(kind: string, name: unknown): void {
  if (typeof name === 'string' && name.length > LIMITS.nameChars)
    refuse(`a ${kind} name of ${name.length} characters is over the limit of ${LIMITS.nameChars}`);
}

function checkList(kind: string, list: unknown, count: number, chars: number): void {
  if (!Array.isArray(list)) return;
  if (list.length > count) refuse(`${list.length} ${kind}s are over the limit of ${count}`);
  for (const x of list) if (typeof x === 'string' && x.length > chars) refuse(`a ${kind} of ${x.length} characters is over the limit of ${chars}`);
}

/** A node joining: its name, its endpoints and the tags its token gives it. */
export function checkMember(input: { id: string; endpoints?: string[]; tags?: string[] }): void {
  checkName('node', input.id);
  checkList('endpoint', input.endpoints, LIMITS.endpoints, LIMITS.endpointChars);
  checkList('tag', input.tags, LIMITS.tags, LIMITS.tagChars);
}

export function checkTags(tags: string[] | undefined): void {
  checkList('tag', tags, LIMITS.tags, LIMITS.tagChars);
}

export function checkModule(def: ModuleDef): void {
  checkName('module', def.name);
  for (const f of def.files ?? []) {
    const size = typeof f.content === 'string' ? Buffer.byteLength(f.content, 'utf8') : 0;
    if (size > LIMITS.fileBytes) refuse(`module ${def.name}: ${f.path} holds ${size} bytes, over the limit of ${LIMITS.fileBytes}`);
  }
  const size = bytes(def);
  if (size > LIMITS.moduleBytes) refuse(`module ${def.name} is ${size} bytes, over the limit of ${LIMITS.moduleBytes}`);
}

/** The modules assigned to one node travel in its every snapshot: their sum is bounded. */
export function checkAssigned(node: string, defs: (ModuleDef | null | undefined)[]): void {
  const size = defs.reduce((n, d) => n + (d ? bytes(d) : 0), 0);
  if (size > LIMITS.assignedBytes) refuse(`the modules assigned to ${node} would be ${size} bytes, over the limit of ${LIMITS.assignedBytes}`);
}

export function checkPolicy(rules: PolicyRule[]): void {
  if (rules.length > LIMITS.policyRules) refuse(`${rules.length} policy rules are over the limit of ${LIMITS.policyRules}`);
  for (const r of rules) {
    checkName('tag', r.from);
    checkName('tag', r.to);
  }
  const size = bytes(rules);
  if (size > LIMITS.policyBytes) refuse(`a policy of ${size} bytes is over the limit of ${LIMITS.policyBytes}`);
}

/**
 * A bound never below the protobuf encoding of `v` as one field (or one map entry) of its parent:
 * every key is counted as if it were written (a map's key is; a message's field name is not), every
 * tag as 5 bytes and every length or number as a 10-byte varint, every UTF-16 unit as 3 bytes of
 * UTF-8. One walk, no string built: a small delta's check costs less than its JSON (issue 31).
 */
function wireBound(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return 15 + v.length * 3;
    case 'number':
    case 'bigint':
    case 'boolean':
      return 15;
    case 'object': {
      if (v === null) return 0;
      if (v instanceof Uint8Array) return 15 + v.byteLength;
      let n = 15;
      if (Array.isArray(v)) {
        for (const x of v) n += wireBound(x);
        return n;
      }
      const o = v as Record<string, unknown>;
      for (const k in o) if (o[k] !== undefined) n += 30 + k.length * 3 + wireBound(o[k]);
      return n;
    }
    default:
      return 0;
  }
}

/**
 * The delta's exact encoded length on the wire (the transport encodes the same message, its unset
 * hash and signature empty). A shape the generated encoder does not take as it is (the transport's
 * codec fills it in) is measured by its JSON, as before: never below its encoding.
 */
function encodedBytes(delta: StateDelta): number {
  const d = { ...delta, stateHash: delta.stateHash ?? '', versionSignature: delta.versionSignature ?? new Uint8Array(0) };
  try {
    return wire.StateDelta.encode(d as wire.StateDelta).finish().byteLength;
  } catch {
    return bytes(delta);
  }
}

/**
 * Splits a delta into parts each at most `maxBytes` when encoded. Whether it needs splitting is
 * its encoded length: a cheap bound first (wireBound), the exact protobuf length only when the
 * bound is over. A delta over the budget is split as before, by JSON length (the wire's protobuf
 * is never larger for these strings). Peers are packed by size, not count;
 * the components go whole in the first part. A part that cannot fit (the components alone, or
 * one peer) is MESHP_MESSAGE_TOO_LARGE: the caller logs it and sends nothing.
 */
export function splitForWire(delta: StateDelta, maxBytes = wireBudget()): StateDelta[] {
  if (wireBound(delta) <= maxBytes || encodedBytes(delta) <= maxBytes) return [delta];
  const { upsertPeers: _u, removePeers: _r, part: _p, ...head } = delta;
  const headBytes = bytes({ ...head, upsertPeers: [], removePeers: [], part: { index: 999_999, count: 999_999 } });
  if (headBytes > maxBytes) {
    throw new MeshpError(
      'MESHP_MESSAGE_TOO_LARGE',
      `the components of delta ${delta.fromVersion}→${delta.toVersion} are ${headBytes} bytes, over the ${maxBytes}-byte budget of one message`,
    );
  }
  const shell = bytes({
    fromVersion: delta.fromVersion,
    toVersion: delta.toVersion,
    network: delta.network,
    upsertPeers: [],
    removePeers: [],
    part: { index: 999_999, count: 999_999 },
  });
  type Draft = { upsertPeers: StateDelta['upsertPeers']; removePeers: StateDelta['removePeers']; size: number };
  const drafts: Draft[] = [{ upsertPeers: [], removePeers: [], size: headBytes }];
  const place = (entry: unknown, into: 'upsertPeers' | 'removePeers') => {
    const size = bytes(entry) + 1;
    if (shell + size > maxBytes)
      throw new MeshpError('MESHP_MESSAGE_TOO_LARGE', `one peer entry of ${size} bytes is over the ${maxBytes}-byte budget of one message`);
    let d = drafts.at(-1)!;
    if (d.size + size > maxBytes) drafts.push((d = { upsertPeers: [], removePeers: [], size: shell }));
    (d[into] as unknown[]).push(entry);
    d.size += size;
  };
  for (const r of delta.removePeers) place(r, 'removePeers');
  for (const u of delta.upsertPeers) place(u, 'upsertPeers');
  const count = drafts.length;
  return drafts.map(
    (d, index) =>
      ({
        ...(index === 0 ? head : { fromVersion: delta.fromVersion, toVersion: delta.toVersion, network: delta.network }),
        upsertPeers: d.upsertPeers,
        removePeers: d.removePeers,
        ...(count > 1 ? { part: { index, count } } : {}),
      }) as StateDelta,
  );
}

/** Half the message limit: room for the envelope and any estimate error. */
export function wireBudget(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): number {
  return Math.floor(maxMessageBytes / 2);
}
