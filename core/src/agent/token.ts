import { tokenInvalid } from '../conditions.js';

/**
 * An enrolment token as the operator copies it: `meshp1.<claims>.<secret>`. The claims say which
 * network, whether the node is adopted, and the controller certificate's fingerprint the agent pins;
 * the secret is what the controller keeps only a hash of. Changing the claims does not help a forger:
 * the controller checks them against what it stored with the secret's hash.
 */
export interface TokenClaims {
  network: string;
  adopted: boolean;
  /** SHA-256 of the controller's certificate, hex. */
  fingerprint: string;
  /**
   * The network's private network is a WireGuard tunnel: the agent raises one by default. Advisory
   * (not checked by the controller): it only chooses what the agent itself runs.
   */
  tunnel?: 'wireguard';
}

const PREFIX = 'meshp1';

export function encodeToken(claims: TokenClaims, secret: string): string {
  const body = Buffer.from(
    JSON.stringify({ n: claims.network, a: claims.adopted, f: claims.fingerprint, ...(claims.tunnel ? { t: claims.tunnel } : {}) }),
  ).toString('base64url');
  return `${PREFIX}.${body}.${secret}`;
}

export function decodeToken(token: string): { claims: TokenClaims; secret: string } {
  const parts = token.trim().split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !parts[1] || !parts[2]) {
    throw tokenInvalid('the enrolment token is not a meshp1 token');
  }
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
  } catch (cause) {
    throw tokenInvalid('the enrolment token claims cannot be read', { cause });
  }
  const c = raw as { n?: unknown; a?: unknown; f?: unknown; t?: unknown };
  if (typeof c.n !== 'string' || typeof c.a !== 'boolean' || typeof c.f !== 'string' || !/^[0-9a-f]{64}$/.test(c.f)) {
    throw tokenInvalid('the enrolment token claims are malformed');
  }
  return { claims: { network: c.n, adopted: c.a, fingerprint: c.f, ...(c.t === 'wireguard' ? { tunnel: 'wireguard' as const } : {}) }, secret: parts[2] };
}

/** Colon-separated upper-case (as node:crypto prints it) or plain hex → plain lower-case hex. */
export function normaliseFingerprint(fp: string): string {
  return fp.replace(/:/g, '').toLowerCase();
}
