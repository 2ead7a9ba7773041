import { join } from 'node:path';
import type { Family } from './cidr.js';

/** Where netfilter-persistent (iptables-persistent) loads each family's rules from, under the root prefix. */
export function configFile(root: string, family: Family): string {
  return join(root, 'etc/iptables', family === 6 ? 'rules.v6' : 'rules.v4');
}
