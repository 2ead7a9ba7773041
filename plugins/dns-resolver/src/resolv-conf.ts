/**
 * The resolvers the machine already uses, read from its resolver configuration (`/etc/resolv.conf`
 * under the host's root) and never written: a query the mesh does not answer goes where it would
 * have gone without the mesh. A stub of systemd-resolved (127.0.0.53) is such a resolver too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addressFamily } from '@meshp/core/net';
import type { Upstream } from './forward.js';

export function resolvConfPath(root: string): string {
  return join(root, 'etc/resolv.conf');
}

/** The `nameserver` lines of a resolv.conf text, in order (a zone index or a bad address is skipped). */
export function nameserversOf(text: string): Upstream[] {
  const out: Upstream[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m && addressFamily(m[1]!) !== null) out.push({ address: m[1]!, port: 53 });
  }
  return out;
}

/** The found nameservers, or [] when the file is not there or not readable. */
export function foundNameservers(root: string): Upstream[] {
  try {
    return nameserversOf(readFileSync(resolvConfPath(root), 'utf8'));
  } catch {
    return [];
  }
}
