/**
 * Whether a TCP flags match meets a new connection's first packet: a SYN, sent with ECE and CWR
 * as well when the client asks for ECN. Both firewall plugins read `--tcp-flags MASK COMP` /
 * `tcp flags & (MASK) == COMP` with this, so a check that no SYN passes (the NULL and XMAS scan
 * drops, `! --syn`) is read as matching no new connection, and `--syn` as matching every one.
 */

const ALL = ['fin', 'syn', 'rst', 'psh', 'ack', 'urg', 'ece', 'cwr'] as const;

/** Flag names as iptables or nft print them (`ALL`, `NONE`, `FIN,SYN`, `syn`); null for a name not known. */
export function tcpFlagSet(names: readonly string[]): Set<string> | null {
  const out = new Set<string>();
  for (const raw of names) {
    const n = raw.toLowerCase();
    if (n === 'all') ALL.forEach((f) => out.add(f));
    else if (n === 'none' || n === '') continue;
    else if ((ALL as readonly string[]).includes(n)) out.add(n);
    else return null;
  }
  return out;
}

/**
 * Whether `(flags & mask) == comp` (negated: `!=`) holds for a new connection's SYN: true, false,
 * or null when a SYN with ECN asked and one without answer differently (the walk cannot say).
 */
export function synMeets(mask: ReadonlySet<string>, comp: ReadonlySet<string>, negate: boolean): boolean | null {
  const meets = (flags: readonly string[]) => {
    const got = flags.filter((f) => mask.has(f));
    const equal = got.length === comp.size && got.every((f) => comp.has(f));
    return equal !== negate;
  };
  const plain = meets(['syn']);
  return plain === meets(['syn', 'ece', 'cwr']) ? plain : null;
}
