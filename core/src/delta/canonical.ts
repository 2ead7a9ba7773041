import { createHash } from 'node:crypto';

/**
 * Canonical JSON with proto3's idea of a default: a field holding '', 0, false, an empty list or an
 * empty message reads the same as an absent one, because on the wire they are the same. Keys are
 * sorted; list order is kept (the controller sends lists sorted). So a value built in memory and
 * the same value decoded from the wire have one canonical form, hence one hash.
 */
export function protoCanonicalJson(value: unknown): string {
  const c = canonicalise(value);
  return c === undefined ? '{}' : JSON.stringify(c);
}

function canonicalise(value: unknown): unknown {
  if (value === null || value === undefined || value === '' || value === 0 || value === false) return undefined;
  if (Array.isArray(value)) {
    if (value.length === 0) return undefined;
    return value.map((v) => canonicalise(v) ?? null);
  }
  if (typeof value === 'object') {
    if (value instanceof Uint8Array) return value.length === 0 ? undefined : Buffer.from(value).toString('base64');
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value as object).sort()) {
      const c = canonicalise((value as Record<string, unknown>)[key]);
      if (c !== undefined) out[key] = c;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  return value;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function protoCanonicalHash(value: unknown): string {
  return sha256Hex(protoCanonicalJson(value));
}
