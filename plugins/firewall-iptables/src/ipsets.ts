/**
 * The node's ipsets, read where the runner runs its commands (`ipset save`), as the nft plugin
 * reads named sets: a set of one address dimension (`hash:ip`, `hash:net`, `bitmap:ip`) is read as
 * the sources it holds now, members with a timeout included (fail2ban's and the blocklist tools'
 * bans are bans until they expire). Sets of other types are left out: a rule on one is unread.
 */
import { cidrSpan, type Span } from '@meshp/core/net';
import type { CommandRunner } from './runner.js';

const READABLE = new Set(['hash:ip', 'hash:net', 'bitmap:ip']);

/** `ipset save` output as the members of its readable sets. */
export function parseIpsets(text: string): Map<string, Span[]> {
  const out = new Map<string, Span[]>();
  const unreadable = new Set<string>();
  for (const line of text.split('\n')) {
    const w = line.trim().split(/\s+/);
    if (w[0] === 'create' && w[1] && w[2]) {
      if (READABLE.has(w[2])) out.set(w[1], []);
      else unreadable.add(w[1]);
    } else if (w[0] === 'add' && w[1] && w[2] && out.has(w[1])) {
      try {
        out.get(w[1])!.push(cidrSpan(w[2].includes('-') ? w[2].split('-')[0]! : w[2]));
        // A range member (a-b) is read only from its first address: the set is then unread.
        if (w[2].includes('-')) unreadable.add(w[1]);
      } catch {
        unreadable.add(w[1]);
      }
    }
  }
  for (const n of unreadable) out.delete(n);
  return out;
}

/** The readable ipsets, or undefined when `ipset` cannot be run. */
export async function readIpsets(runner: CommandRunner): Promise<Map<string, Span[]> | undefined> {
  const r = await runner('ipset', ['save']).catch(() => null);
  return r && r.code === 0 ? parseIpsets(r.stdout) : undefined;
}
