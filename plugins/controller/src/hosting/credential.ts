/**
 * The admin credential: made at first start, kept in `admin.credential` (0600) in the state folder.
 * It carries the certificate's fingerprint too, so the CLI needs only this file to reach the
 * controller safely: `meshp-admin1.<fingerprint>.<secret>`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';

export const ADMIN_CREDENTIAL_FILE = 'admin.credential';

export interface AdminCredential {
  fingerprint: string;
  secret: string;
}

export function parseAdminCredential(text: string): AdminCredential {
  const m = /^meshp-admin1\.([0-9a-f]{64})\.([A-Za-z0-9_-]{20,})$/.exec(text.trim());
  if (!m) throw new MeshpError('MESHP_AUTH_FAILED', 'the admin credential is not a meshp-admin1 credential');
  return { fingerprint: m[1]!, secret: m[2]! };
}

export function formatAdminCredential(c: AdminCredential): string {
  return `meshp-admin1.${c.fingerprint}.${c.secret}`;
}

export function readAdminCredential(file: string): AdminCredential {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    throw new MeshpError('MESHP_AUTH_FAILED', `cannot read the admin credential ${file}`, { cause });
  }
  return parseAdminCredential(text);
}

/** Made once; a certificate made again later gets the credential's fingerprint rewritten, its secret kept. */
export function ensureAdminCredential(stateDir: string, fingerprint: string): AdminCredential {
  const file = join(stateDir, ADMIN_CREDENTIAL_FILE);
  let c: AdminCredential | null = existsSync(file) ? readAdminCredential(file) : null;
  if (!c || c.fingerprint !== fingerprint) {
    c = { fingerprint, secret: c?.secret ?? randomBytes(32).toString('base64url') };
    writeFileSync(file, `${formatAdminCredential(c)}\n`, { mode: 0o600 });
  }
  chmodSync(file, 0o600);
  return c;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Constant time, whatever the lengths. */
export function secretMatches(presented: string, secret: string): boolean {
  return timingSafeEqual(digest(presented), digest(secret));
}
