/**
 * ufw keeps its rules, with their comments, on disk: `### tuple ###` lines in
 * /etc/ufw/user.rules and user6.rules. The kernel's copy has no comments, so marks are read here.
 *
 *   ### tuple ### allow tcp 9090 0.0.0.0/0 any 10.71.1.0/24 in comment=6d657368703a…
 *   ### tuple ### route:deny tcp 18080 0.0.0.0/0 any 0.0.0.0/0 in
 */
export interface UfwRule {
  route: boolean;
  action: 'allow' | 'deny' | 'reject' | 'limit';
  protocol: string;
  port: string;
  /** Source range; "any" for 0.0.0.0/0 and ::/0. */
  from: string;
  comment: string | null;
}

const ANY = new Set(['0.0.0.0/0', '::/0']);

export function parseTuples(text: string): UfwRule[] {
  const out: UfwRule[] = [];
  for (const line of text.split('\n')) {
    const m = /^### tuple ### (route:)?(allow|deny|reject|limit)(?:_\w+)? (\S+) (\S+) (\S+) (\S+) (\S+) (\S+)(?: comment=([0-9a-f]*))?/.exec(line.trim());
    if (!m) continue;
    const [, route, action, protocol, port, , , src, , hex] = m;
    out.push({
      route: !!route,
      action: action as UfwRule['action'],
      protocol: protocol!,
      port: port!,
      from: ANY.has(src!) ? 'any' : src!,
      comment: hex ? Buffer.from(hex, 'hex').toString('utf8') : null,
    });
  }
  return out;
}

export function ruleKey(r: UfwRule): string {
  return [r.route ? 'route' : 'in', r.action, r.protocol, r.port, r.from, r.comment ?? ''].join('|');
}

/** The ufw command words for a rule, after `ufw` (and `insert N` when placed). */
export function ruleWords(r: UfwRule): string[] {
  const from = r.from === 'any' ? [] : ['from', r.from];
  return [...(r.route ? ['route'] : []), r.action, ...from, 'to', 'any', 'port', r.port, 'proto', r.protocol];
}
