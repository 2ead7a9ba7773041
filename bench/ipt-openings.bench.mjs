// 1,000 openings converged by @meshp/firewall-iptables vs a hand-written `iptables-restore --noflush`
// of the same 1,000 rules, in the same run, for both kinds (iptables-nft, iptables-legacy), in a
// namespace made here; then a no-op ensure with 1,000 present (how many times the rules were read),
// against one save of each family.
// Run: npx tsc -b plugins/firewall-iptables && node bench/ipt-openings.bench.mjs   (root)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { IptablesDriver, nsenterRunner } from '@meshp/firewall-iptables';

const N = 1000;
const ROUNDS = 7; // plus one warm-up round of each, untimed
const BASE = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp -m tcp --dport 8080 -j ACCEPT
-A INPUT -p tcp -j REJECT --reject-with tcp-reset
COMMIT
`;
const openings = Array.from({ length: N }, (_, i) => ({
  id: `bench/incoming/tcp/${20000 + i}`,
  module: 'bench',
  port: 20000 + i,
  protocol: 'tcp',
  from: ['10.71.1.0/24'],
  path: 'incoming',
  action: 'accept',
}));
// The same rules, where the plugin puts them: just before the REJECT (position 5 of INPUT), in order.
const HAND = `*filter\n${openings
  .map((o, i) => `-I INPUT ${5 + i} -s 10.71.1.0/24 -p tcp -m tcp --dport ${o.port} -m comment --comment "meshp:${o.id}" -j ACCEPT`)
  .join('\n')}\nCOMMIT\n`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const backend of ['nft', 'legacy']) {
  const ns = `iq${randomBytes(2).toString('hex')}b`;
  const netns = `/var/run/netns/${ns}`;
  const restore = (text, ...args) => execFileSync('nsenter', [`--net=${netns}`, '--', `iptables-${backend}-restore`, ...args], { input: text });
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const runner = nsenterRunner(netns);
    let calls = 0;
    const counting = async (cmd, args, input) => {
      calls++;
      return runner(cmd, args, input);
    };
    const driver = new IptablesDriver(backend, { runner: counting, root: '/nonexistent' });
    const handMs = [];
    const pluginMs = [];
    for (let r = -1; r < ROUNDS; r++) {
      restore(BASE);
      let t0 = performance.now();
      restore(HAND, '--noflush');
      if (r >= 0) handMs.push(performance.now() - t0);

      restore(BASE);
      t0 = performance.now();
      const res = await driver.ensure(openings, []);
      if (r >= 0) pluginMs.push(performance.now() - t0);
      if (res.added.length !== N) throw new Error(`expected ${N} added, got ${res.added.length}`);
    }
    const h = median(handMs);
    const p = median(pluginMs);
    console.log(`iptables-${backend}:`);
    console.log(`  hand-written iptables-restore --noflush, ${N} rules: ${h.toFixed(1)} ms (median of ${ROUNDS})`);
    console.log(`  plugin ensure, ${N} openings:                      ${p.toFixed(1)} ms (median of ${ROUNDS}; save of each family + one restore)`);
    console.log(`  ratio plugin / hand-written:                       ${(p / h).toFixed(2)}x (goal <= 2x)`);

    // The idle agent (issue 31): a no-op ensure with N present, against one save of each family
    // (iptables-save, ip6tables-save: the least a no-op can do), alternated, medians of ROUNDS.
    const noopMs = [];
    const saveMs = [];
    let reads = [];
    let commands = 0;
    for (let r = -1; r < ROUNDS; r++) {
      calls = 0;
      for (const t of Object.values(driver.tools)) t.reads = 0;
      let t0 = performance.now();
      const noop = await driver.ensure(openings, []);
      if (r >= 0) noopMs.push(performance.now() - t0);
      if (noop.added.length || noop.removed.length) throw new Error('the no-op ensure changed something');
      reads = Object.values(driver.tools).map((t) => t.reads);
      commands = calls;
      t0 = performance.now();
      await Promise.all([runner(`iptables-${backend}-save`, []), runner(`ip6tables-${backend}-save`, [])]);
      if (r >= 0) saveMs.push(performance.now() - t0);
    }
    const n = median(noopMs);
    const sv = median(saveMs);
    console.log(
      `  no-op ensure with ${N} present: ${n.toFixed(1)} ms; rules read ${reads.join(' + ')} time(s) (IPv4 + IPv6), ${commands} command(s) run (goal: once per family)`,
    );
    console.log(`  one save of each family, side by side:          ${sv.toFixed(1)} ms`);
    console.log(`  ratio no-op / the saves:                        ${(n / sv).toFixed(2)}x (goal <= 1.2x)`);
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
}
