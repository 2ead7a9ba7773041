/**
 * Peers out of scope but still configured: their traffic is already dropped by the filter, their
 * WireGuard peer stays until `until` so a policy flap does not cost a handshake. Kept in the state
 * folder, so an agent restart neither forgets to remove them nor removes them early.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

export interface GraceEntry {
  id: string;
  publicKey: string;
  addresses: string[];
  /** ms since the epoch. */
  until: number;
}

export function readGrace(file: string): GraceEntry[] {
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    return Array.isArray(v)
      ? (v as GraceEntry[]).filter((e) => typeof e?.id === 'string' && typeof e.publicKey === 'string' && typeof e.until === 'number')
      : [];
  } catch {
    return [];
  }
}

export function writeGrace(file: string, entries: Iterable<GraceEntry>): void {
  const tmp = `${file}.tmp`;
  const plain = [...entries].map(({ id, publicKey, addresses, until }) => ({ id, publicKey, addresses, until }));
  writeFileSync(tmp, JSON.stringify(plain), { mode: 0o600 });
  renameSync(tmp, file);
}
