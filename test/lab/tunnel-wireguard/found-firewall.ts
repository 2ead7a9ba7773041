/**
 * A via node's found firewall in the mesh labs (issue 26): the nftables ruleset its operator loads
 * (input and forward policy drop, its own services allowed), and the found rules read as the operator
 * reads them, without meshp's marked ones.
 */
import { writeFileSync } from 'node:fs';
import type { Node } from './mesh-bed.js';
import { PORT } from './mesh-bed.js';

export const NFT_FOUND = `flush ruleset
table inet filter {
  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept
    ct state invalid drop
    iif "lo" accept
    tcp dport { 22, ${PORT} } accept
  }
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state invalid drop
  }
}
`;

/** The found ruleset as the operator reads it, without the marked rules (and handles, counters, dates). */
export const unmarked = (text: string): string =>
  text
    .split('\n')
    .filter((l) => !/meshp:/.test(l) && !/^#/.test(l))
    .map((l) => l.replace(/\[\d+:\d+\]/, '').replace(/ # handle \d+/, ''))
    .join('\n');

export const nftFound = async (n: Node): Promise<string> => (await n.ns.exec('nft', ['list', 'table', 'inet', 'filter'])).stdout;
export const nftAll = async (n: Node): Promise<string> => (await n.ns.exec('nft', ['list', 'ruleset'])).stdout;

/**
 * The operator reloads the found file: the table as the reload left it, listed in the reload's own
 * `nft -f` run (the agent puts its marked rules back within moments: a second `nft list` may see them).
 */
export async function reloadNft(n: Node, conf: string): Promise<string> {
  const script = `${conf}.reload`;
  writeFileSync(script, `include "${conf}"\nlist table inet filter\n`);
  return (await n.ns.exec('nft', ['-f', script])).stdout;
}
