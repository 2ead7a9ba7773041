import { chainDrops, classifyTable, isDropRule, isMarked, rulesOf } from './classify.js';
import { tableKey, type Ruleset } from './schema.js';

/** A few lines an operator reads: each table, whose it is, and what its base chains do. */
export function summarize(rs: Ruleset): string[] {
  const lines: string[] = [];
  for (const t of rs.tables) {
    const owner = classifyTable(t, rs);
    const base = rs.chains.filter((c) => tableKey(c) === tableKey(t) && c.hook);
    const chains = base.map((c) => {
      const rules = rulesOf(rs, c);
      const drops = rules.filter((r) => !isMarked(r) && isDropRule(r)).length;
      const marked = rules.filter(isMarked).length;
      return `${c.name} (hook ${c.hook}, policy ${c.policy ?? 'accept'}, ${rules.length} rules, ${drops} drop${marked ? `, ${marked} meshp` : ''}${chainDrops(rs, c) ? '' : ', open'})`;
    });
    lines.push(`table ${tableKey(t)} [${owner}]${chains.length ? ': ' + chains.join('; ') : ''}`);
  }
  return lines.length > 0 ? lines : ['no nftables tables'];
}
