/**
 * The ports of a filter rule as the policy writes them: `80`, `80/tcp`, `8000-8100`, `53/udp`;
 * `*` or `any`, or no ports at all, is every port and protocol. Anything else is refused, never guessed.
 */
import { MeshpError } from '@meshp/core';

export interface PortMatch {
  /** `any`: every protocol, no port match. */
  protocol: 'tcp' | 'udp' | 'any';
  /** nft text: `80` or `8000-8100`; absent with protocol `any`. */
  range?: string;
}

export function parsePorts(ports: readonly string[]): PortMatch[] {
  if (ports.length === 0 || ports.some((p) => p === '*' || p === 'any')) return [{ protocol: 'any' }];
  const out: PortMatch[] = [];
  for (const text of ports) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?(?:\/(tcp|udp))?$/.exec(text.trim());
    const lo = Number(m?.[1]);
    const hi = m?.[2] === undefined ? lo : Number(m[2]);
    if (!m || lo < 1 || hi > 65535 || hi < lo) {
      throw new MeshpError('MESHP_DELTA_INVALID', `the filter names a port the tunnel cannot read: ${JSON.stringify(text)}`);
    }
    const range = lo === hi ? String(lo) : `${lo}-${hi}`;
    for (const protocol of m[3] ? [m[3] as 'tcp' | 'udp'] : (['tcp', 'udp'] as const)) out.push({ protocol, range });
  }
  return out;
}
