import { createHash } from 'node:crypto';
import type { ContainerSpec } from '@meshp/core';

/** JSON with object keys sorted and undefined members dropped, so equal specs print equally. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** sha256 (hex) of the spec's canonical JSON: the value of the `meshp.spec-hash` label. */
export function specHash(spec: ContainerSpec): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex');
}
