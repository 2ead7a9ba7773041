import t from 'tap';
import { MeshpError, type Opening } from '@meshp/core';
import { ECHO_MAX_RULES, NftablesDriver, localRunner, localSpawner, netnsPrefix, type Runner } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, lab, ruleLines } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const web: Opening = { id: 'web/incoming/tcp/9000', module: 'web', port: 9000, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };
  const store: Opening = { id: 'store/forwarded/tcp/5432', module: 'store', port: 5432, protocol: 'tcp', from: [], path: 'forwarded', action: 'drop' };

  t.test('a batch that fails half-way (a stale handle) leaves nothing applied', async (t) => {
    const l = await lab(t);
    const inner = localRunner(netnsPrefix(l.server.name));
    // Someone else changes their chain between our listing and our batch: the rules our batch is
    // placed by go away — the reject it goes before, and the rule right before the reject, which
    // the nft script places it after.
    const racing: Runner = async (argv, o) => {
      if (argv.includes('-f')) {
        const chain = JSON.parse(await l.nft(['-j', '-a', 'list', 'chain', 'inet', 'filter', 'input'])) as {
          nftables: { rule?: { handle: number; expr: object[] } }[];
        };
        const rules = chain.nftables.flatMap((x) => (x.rule ? [x.rule] : []));
        const at = rules.findIndex((r) => JSON.stringify(r.expr).includes('reject'));
        for (const r of rules.slice(at - 1, at + 1)) await l.nft(['delete', 'rule', 'inet', 'filter', 'input', 'handle', String(r.handle)]);
      }
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: racing, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    const before = (await ruleLines(l)).filter((x) => !x.includes('reject') && !x.includes('ipv6-icmp'));
    const err = await driver.ensure([web], [store]).catch((e: unknown) => e);
    t.ok(err instanceof MeshpError);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_FAILED');
    t.same(await ruleLines(l), before, 'neither the insert nor the mesh table of the same batch was applied');

    const calm = new NftablesDriver({ runner: inner, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    t.same(await calm.ensure([web], [store]), { added: [web.id, store.id], removed: [] }, 'the next ensure, re-listing first, succeeds');
  });

  t.test('nft exiting 0 having applied nothing (pitfall 5) is caught by the missing receipt, on a real ruleset', async (t) => {
    const l = await lab(t);
    const inner = localRunner(netnsPrefix(l.server.name));
    const swallowed: string[][] = [];
    // A batch nft takes, says nothing about and never commits: exit 0, no change.
    const silent: Runner = async (argv, o) => {
      if (argv.includes('-f')) {
        swallowed.push([...argv]);
        return { code: 0, stdout: '', stderr: '' };
      }
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: silent, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    const before = await ruleLines(l);
    const err = (await driver.ensure([web], []).catch((e: unknown) => e)) as MeshpError;
    t.equal(err?.code, 'MESHP_FIREWALL_FAILED', 'no mesh table yet: no receipt');
    t.match(err?.message, /receipt \d+ is not in set inet meshp receipt/);
    t.same(await ruleLines(l), before, 'and nothing was applied');

    const real = new NftablesDriver({ runner: inner, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    await real.ensure([web], []);
    const withReceipt = await ruleLines(l);
    const err2 = (await driver.ensure([web, { ...web, id: 'dns/incoming/tcp/9053', port: 9053 }], []).catch((e: unknown) => e)) as MeshpError;
    t.equal(err2?.code, 'MESHP_FIREWALL_FAILED', "an earlier batch's receipt in the set does not pass for this one");
    t.equal((err2.details as { receipt: number[] }).receipt.length, 1);
    t.not((err2.details as { receipt: number[] }).receipt[0], (err2.details as { expected: number }).expected);
    t.same(await ruleLines(l), withReceipt, 'nothing applied');
    t.equal(swallowed.length, 2, 'each time one batch, swallowed');
  });

  t.test('the drop alone gone between listing and batch: the batch still applies, the accepts where the drop was', async (t) => {
    const l = await lab(t);
    const inner = localRunner(netnsPrefix(l.server.name));
    const racing: Runner = async (argv, o) => {
      if (argv.includes('-f')) {
        const chain = JSON.parse(await l.nft(['-j', '-a', 'list', 'chain', 'inet', 'filter', 'input'])) as {
          nftables: { rule?: { handle: number; expr: object[] } }[];
        };
        const reject = chain.nftables.find((x) => x.rule && JSON.stringify(x.rule.expr).includes('reject'))!.rule!;
        await l.nft(['delete', 'rule', 'inet', 'filter', 'input', 'handle', String(reject.handle)]);
      }
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: racing, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] });
    const lines = (await l.nft(['list', 'chain', 'inet', 'filter', 'input'])).split('\n').map((x) => x.trim());
    const first = lines.findIndex((x) => x.includes('meshp:'));
    t.equal(lines[first - 1], 'meta l4proto ipv6-icmp accept', 'right after the rule that was before the reject');
    t.notOk(lines.some((x) => x.includes('reject')));
  });

  t.test('one opening into a found ruleset: one read and one write, the receipt read from the echo of the commit', async (t) => {
    const l = await lab(t);
    const inner = localRunner(netnsPrefix(l.server.name));
    const calls: string[][] = [];
    const counting: Runner = async (argv, o) => {
      calls.push([...argv]);
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: counting, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] });
    t.same(
      calls.map((c) => c.slice(0, 3).join(' ')),
      ['nft -j list', 'nft -e -f'],
      'the ruleset read once, the batch written once',
    );
    const receipt = JSON.parse(await l.nft(['-j', 'list', 'set', 'inet', 'meshp', 'receipt'])) as { nftables: { set?: { elem?: number[] } }[] };
    t.equal(receipt.nftables.find((x) => x.set)?.set?.elem?.length, 1, 'the receipt the echo showed is in the set');
    t.ok(
      (await ruleLines(l)).some((x) => x.includes(web.id)),
      'and the opening is placed',
    );
  });

  t.test('into a ruleset past ECHO_MAX_RULES the receipt is read from the set, not echoed', async (t) => {
    const l = await lab(t);
    const many = Array.from({ length: ECHO_MAX_RULES + 1 }, (_, i) => `add rule inet filter forward tcp dport ${20000 + i} drop`).join('\n');
    await l.load(many + '\n');
    const inner = localRunner(netnsPrefix(l.server.name));
    const calls: string[][] = [];
    const counting: Runner = async (argv, o) => {
      calls.push([...argv]);
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: counting, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf' });
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] });
    t.same(
      calls.map((c) => c.slice(0, 3).join(' ')),
      ['nft -j list', 'nft -f ' + calls[1]![2], 'nft -j list'],
      'read, write, then the receipt set',
    );
  });
}
