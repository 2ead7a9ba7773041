// One opening applied into the largest found firewall of the corpus (test/fixtures/firewalls), by
// the plugin's ensure, against a hand-written `nft -f` / `iptables-restore --noflush` of the same
// rule at the same place, in the same run, in a namespace made here; ratio printed. The tools'
// own process start-up (an empty transaction) is measured and shown separately.
// Run: npx tsc -b && node bench/found-opening.bench.mjs   (root)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IptablesDriver, nsenterRunner } from '@meshp/firewall-iptables';
import { NftablesDriver, libnftRunner, localRunner, localSpawner, netnsPrefix } from '@meshp/firewall-nftables';

const ROUNDS = 9; // plus one warm-up round, untimed
const DIR = new URL('../test/fixtures/firewalls/', import.meta.url).pathname;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ruleCount = (text) => text.split('\n').filter((l) => /^\s*-A |^\t\t[a-z]/.test(l)).length;
const largest = (ext) =>
  readdirSync(DIR)
    .filter((f) => f.endsWith(ext) && /^# expect: placed/m.test(readFileSync(join(DIR, f), 'utf8')))
    .map((f) => ({ f, text: readFileSync(join(DIR, f), 'utf8') }))
    .sort((a, b) => ruleCount(b.text) - ruleCount(a.text))[0];
const opening = { id: 'bench/incoming/tcp/7443', module: 'bench', port: 7443, protocol: 'tcp', from: ['10.80.0.0/16'], path: 'incoming', action: 'accept' };
const time = async (fn) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};
const report = (label, fixture, plugin, hand, startup, processes, what) =>
  console.log(
    `${label} ${fixture}: plugin ensure ${plugin.toFixed(1)} ms, hand-written ${hand.toFixed(1)} ms, ratio ${(plugin / hand).toFixed(2)}; ` +
      `tool start-up alone (an empty transaction) ${startup.toFixed(1)} ms; the plugin ran ${processes} tool processes per ensure ` +
      `(${what}), the hand-written one 1: beyond start-ups, plugin ${(plugin - processes * startup).toFixed(1)} ms, ` +
      `hand-written ${(hand - startup).toFixed(1)} ms; ` +
      (plugin / hand <= 1.5
        ? 'goal ≤ 1.5 met'
        : `goal ≤ 1.5 not met by ${(plugin / hand - 1.5).toFixed(2)}: the floor of one read and one write is ${((hand + startup) / hand).toFixed(2)}× here (two start-ups against one)`),
  );
/** A runner that counts the commands it runs (keeping the engine it says it speaks). */
const counting = (runner, box) =>
  Object.assign(
    async (...a) => {
      box.n++;
      return runner(...a);
    },
    { engine: runner.engine },
  );

function withNetns(fn) {
  const ns = `fb${randomBytes(2).toString('hex')}`;
  execFileSync('ip', ['netns', 'add', ns]);
  return fn(ns).finally(() => execFileSync('ip', ['netns', 'del', ns]));
}

// iptables, both backends.
const ipt = largest('.rules.v4');
for (const backend of ['nft', 'legacy']) {
  await withNetns(async (ns) => {
    const path = `/var/run/netns/${ns}`;
    const restore = (text, ...args) => execFileSync('nsenter', [`--net=${path}`, '--', `iptables-${backend}-restore`, ...args], { input: text });
    const save = () => execFileSync('nsenter', [`--net=${path}`, '--', `iptables-${backend}-save`, '-t', 'filter']).toString();
    const box = { n: 0 };
    const driver = new IptablesDriver(backend, { runner: counting(nsenterRunner(path), box), root: '/nonexistent' });
    const plugin = [];
    const hand = [];
    const startup = [];
    const procs = [];
    for (let r = -1; r < ROUNDS; r++) {
      restore(ipt.text);
      box.n = 0;
      const p = await time(() => driver.ensure([opening], []));
      const processes = box.n;
      // Where the plugin put it: its position in INPUT, and its text.
      const input = save()
        .split('\n')
        .filter((l) => l.startsWith('-A INPUT '));
      const at = input.findIndex((l) => l.includes('meshp:'));
      const line = input[at].slice('-A INPUT '.length);
      restore(ipt.text);
      const h = await time(() => restore(`*filter\n-I INPUT ${at + 1} ${line}\nCOMMIT\n`, '--noflush'));
      const s = await time(() => restore('*filter\nCOMMIT\n', '--noflush'));
      if (r >= 0) {
        plugin.push(p);
        hand.push(h);
        startup.push(s);
        procs.push(processes);
      }
    }
    report(
      `iptables-${backend}`,
      ipt.f,
      median(plugin),
      median(hand),
      median(startup),
      median(procs),
      'one save of each family, side by side, and the restore',
    );
  });
}

// nftables: the plugin's default, libnftables in a thread of the agent (no process per command;
// ADR 0048), and for comparison one nft process per command.
const nft = largest('.nft');
for (const engine of ['libnftables', 'process'])
  await withNetns(async (ns) => {
    const prefix = netnsPrefix(ns);
    const run = (args, input) => execFileSync('nsenter', [`--net=/var/run/netns/${ns}`, '--', 'nft', ...args], input === undefined ? {} : { input });
    const box = { n: 0 };
    const procs = [];
    const spawning = localRunner(prefix);
    const nftRunner = engine === 'libnftables' ? libnftRunner('nft', spawning, ns) : spawning;
    const driver = new NftablesDriver({
      runner: spawning,
      nftRunner: counting(nftRunner, box),
      spawner: localSpawner(prefix),
      root: '/nonexistent',
      configFile: '/etc/nftables.conf',
    });
    const file = join(tmpdir(), `fb-${ns}.nft`);
    const plugin = [];
    const hand = [];
    const startup = [];
    try {
      for (let r = -1; r < ROUNDS; r++) {
        run(['-f', '-'], nft.text);
        box.n = 0;
        const p = await time(() => driver.ensure([opening], []));
        const processes = box.n;
        // Where the plugin put it: the handle of the rule before it, and its text (`nft -a list chain`).
        const listing = run(['-a', 'list', 'ruleset']).toString().split('\n');
        const i = listing.findIndex((l) => l.includes('meshp:'));
        const chain = listing
          .slice(0, i)
          .reverse()
          .find((l) => /^\tchain /.test(l))
          .trim()
          .split(' ')[1];
        const table = listing
          .slice(0, i)
          .reverse()
          .find((l) => /^table /.test(l))
          .split(' ')
          .slice(1, 3)
          .join(' ');
        const prev = /# handle (\d+)$/.exec(listing[i - 1])?.[1];
        const text = listing[i].trim().replace(/ # handle \d+$/, '');
        run(['-f', '-'], nft.text);
        writeFileSync(file, `add rule ${table} ${chain} ${prev ? `position ${prev} ` : ''}${text}\n`);
        const h = await time(() => run(['-f', file]));
        writeFileSync(file, '\n');
        const s = await time(() => run(['-f', file]));
        if (r >= 0) {
          plugin.push(p);
          hand.push(h);
          startup.push(s);
          procs.push(processes);
        }
      }
    } finally {
      rmSync(file, { force: true });
    }
    if (driver.nft.engine() !== engine) throw new Error(`the plugin spoke ${driver.nft.engine()}, not ${engine}`);
    if (engine === 'process')
      report(
        'nftables (one process per command)',
        nft.f,
        median(plugin),
        median(hand),
        median(startup),
        median(procs),
        'the list, and the batch echoed with its receipt',
      );
    else {
      const p = median(plugin);
      const h = median(hand);
      console.log(
        `nftables (libnftables in-process, the default) ${nft.f}: plugin ensure ${p.toFixed(1)} ms, hand-written nft -f ${h.toFixed(1)} ms, ratio ${(p / h).toFixed(2)}; ` +
          `${median(procs)} nft commands per ensure (the list, and the batch echoed with its receipt), no tool process; the hand-written one 1 process ` +
          `(its start-up alone ${median(startup).toFixed(1)} ms); ${p / h <= 1.5 ? 'goal ≤ 1.5 met' : `goal ≤ 1.5 not met by ${(p / h - 1.5).toFixed(2)}`}`,
      );
    }
  });
