import { readFileSync } from 'node:fs';
import t from 'tap';
import { MeshpError, type Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesDriver, NftablesPlugin, localRunner, localSpawner, type RunResult, type Runner } from '@meshp/firewall-nftables';

const RULESET = JSON.stringify({
  nftables: [
    { metainfo: { version: '1.0.6', json_schema_version: 1 } },
    { table: { family: 'inet', name: 'filter', handle: 1 } },
    { chain: { family: 'inet', table: 'filter', name: 'input', handle: 1, type: 'filter', hook: 'input', prio: 0, policy: 'drop' } },
  ],
});
const web: Opening = { id: 'web/incoming/tcp/9000', module: 'web', port: 9000, protocol: 'tcp', from: [], path: 'incoming', action: 'accept' };
/** Two rules in an inet table: one per address family. */
const web2: Opening = { ...web, from: ['10.70.1.0/24', 'fd70:1::/64'] };

function driver(runner: Runner): NftablesDriver {
  return new NftablesDriver({ runner, spawner: localSpawner(), root: '/nonexistent', configFile: '/etc/nftables.conf' });
}

const ok = (stdout: string): RunResult => ({ code: 0, stdout, stderr: '' });

async function code(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => undefined,
    (e: unknown) => (e instanceof MeshpError ? e.code : `not coded: ${String(e)}`),
  );
}

t.test('malformed nft output is MESHP_FIREWALL_OUTPUT', async (t) => {
  for (const out of [
    '{"nftables": [',
    'not json',
    '{"other": []}',
    '{"nftables": [{"rule": {"family": "inet", "table": "f"}}]}',
    '{"nftables": [{"table": {"family": "atlantis", "name": "x"}}]}',
  ]) {
    t.equal(await code(driver(async () => ok(out)).openings()), 'MESHP_FIREWALL_OUTPUT', out);
  }
});

t.test('a failing nft is MESHP_FIREWALL_FAILED with its message', async (t) => {
  const d = driver(async () => ({ code: 1, stdout: '', stderr: 'Error: Could not process rule: Operation not permitted\n' }));
  const err = (await d.openings().catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /Operation not permitted/);
});

t.test('a missing binary is MESHP_FIREWALL_TOOL_MISSING, directly or behind a wrapper', async (t) => {
  const direct = new NftablesDriver({
    runner: localRunner(),
    spawner: localSpawner(),
    root: '/',
    configFile: '/etc/nftables.conf',
    bin: 'nft-not-installed-here',
  });
  t.equal(await code(direct.openings()), 'MESHP_FIREWALL_TOOL_MISSING');
  const wrapped = driver(async () => ({ code: 127, stdout: '', stderr: 'nsenter: failed to execute nft: No such file or directory' }));
  t.equal(await code(wrapped.ensure([web], [])), 'MESHP_FIREWALL_TOOL_MISSING');
});

t.test('a missing nft is a sighting without a driver, not a crash of detection', async (t) => {
  const host = new Host({ root: '/nonexistent' }).use(new NftablesPlugin({ bin: 'nft-not-installed-here' }));
  t.equal((await host.firewall())?.kind, 'none');
  t.match(host.firewallSightings(), [{ kind: 'nftables', active: false, summary: 'nft is not installed' }]);
});

/** `nft -j list set inet meshp receipt` output holding these elements. */
const receiptSet = (...elem: number[]): string =>
  JSON.stringify({
    nftables: [{ metainfo: { version: '1.0.6' } }, { set: { family: 'inet', name: 'receipt', table: 'meshp', type: 'mark', handle: 1, elem } }],
  });

/** The nonce a native batch file sets as its receipt. */
function nonceIn(argv: readonly string[]): number {
  const m = /add element inet meshp receipt \{ (\d+) \}/.exec(readFileSync(argv[argv.length - 1]!, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

t.test('a batch nft accepts but does not apply (exit 0, no receipt) is MESHP_FIREWALL_FAILED', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('set')) return { code: 1, stdout: '', stderr: 'Error: No such file or directory\nlist set inet meshp receipt\n' };
    return ok(argv.includes('list') ? RULESET : '');
  });
  const err = (await d.ensure([web2], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /receipt \d+ is not in set inet meshp receipt/);
  t.same(
    calls.map((c) => c.slice(0, 4).join(' ')),
    ['nft -j list ruleset', 'nft -e -f ' + calls[1]![3], 'nft -j list set'],
    're-listed right before the one batch (echoed), then, the echo holding no receipt, the receipt set read',
  );
  t.match(calls[1]![3], /meshp-nft-.*\.nft$/, 'the batch goes through a file, never stdin');
});

t.test("an earlier batch's receipt does not pass for this one", async (t) => {
  let old = 0;
  const listed = JSON.parse(RULESET) as { nftables: object[] };
  const d = driver(async (argv) => {
    if (argv.includes('set')) return ok(receiptSet(old));
    if (argv.includes('list'))
      return ok(
        JSON.stringify({ nftables: [...listed.nftables, { set: { family: 'inet', name: 'receipt', table: 'meshp', type: 'mark', handle: 1, elem: [old] } }] }),
      );
    return ok('');
  });
  for (old of [1, 0xffffffff, 77]) {
    const err = (await d.ensure([web], []).catch((e: unknown) => e)) as MeshpError;
    t.equal(err?.code, 'MESHP_FIREWALL_FAILED', `receipt ${old} listed before and after`);
    t.match(err?.details, { receipt: [old] });
    t.not((err?.details as { expected?: number })?.expected, old, 'the new nonce is never the one already there');
  }
});

t.test('a small batch whose echo holds its receipt is done: one read, one write', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    // What nft -e prints once the kernel committed: the receipt as a hex mark.
    if (argv.includes('-f'))
      return ok(`add rule inet filter input tcp dport 9000 accept\nadd element inet meshp receipt { 0x${nonceIn(argv).toString(16).padStart(8, '0')} }\n`);
    return ok(argv.includes('list') ? RULESET : '');
  });
  t.same(await d.ensure([web2], []), { added: [web2.id], removed: [] });
  t.same(
    calls.map((c) => c.slice(0, 3).join(' ')),
    ['nft -j list', 'nft -e -f'],
  );
});

t.test('an echo holding another receipt is not taken for this batch: the set is read', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-f')) return ok(`add element inet meshp receipt { 0x${((nonceIn(argv) % 0xfffffff) + 1).toString(16)} }\n`);
    if (argv.includes('set')) return ok(receiptSet(5));
    return ok(argv.includes('list') ? RULESET : '');
  });
  t.equal(await code(d.ensure([web2], [])), 'MESHP_FIREWALL_FAILED');
  t.equal(calls.length, 3);
});

t.test('a batch whose receipt reads back is done; the receipt is the only thing read after it', async (t) => {
  const calls: string[][] = [];
  let nonce = NaN;
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-f')) nonce = nonceIn(argv);
    if (argv.includes('set')) return ok(receiptSet(nonce));
    return ok(argv.includes('list') ? RULESET : '');
  });
  t.same(await d.ensure([web2], []), { added: [web2.id], removed: [] });
  t.ok(Number.isInteger(nonce) && nonce >= 1 && nonce <= 0xffffffff, 'the batch carries a 32-bit nonce');
  t.equal(calls.length, 3);
});

t.test('malformed receipt output is MESHP_FIREWALL_OUTPUT', async (t) => {
  for (const out of [
    'not json',
    '{"nftables": 1}',
    receiptSet().replace('"receipt"', '"other"'),
    JSON.stringify({ nftables: [{ set: { name: 'receipt', table: 'meshp', elem: ['x'] } }] }),
  ]) {
    const d = driver(async (argv) => ok(argv.includes('set') ? out : argv.includes('list') ? RULESET : ''));
    t.equal(await code(d.ensure([web], [])), 'MESHP_FIREWALL_OUTPUT', out);
  }
});

t.test('when nft cannot parse the native batch, the same batch goes as JSON and is checked by a re-list', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-f') && !argv.includes('-j')) return { code: 1, stdout: '', stderr: 'x.nft:1:1-3: Error: syntax error, unexpected junk\n' };
    return ok(argv.includes('list') ? RULESET : '');
  });
  const err = (await d.ensure([web], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /still differs/, 'the fake applies nothing: the re-list sees it');
  t.same(
    calls.map((c) =>
      c
        .filter((a) => a !== '-e')
        .slice(0, 2)
        .join(' '),
    ),
    ['nft -j', 'nft -f', 'nft -j', 'nft -j'],
  );
  t.same(calls[2]!.slice(0, 3), ['nft', '-j', '-f']);
});

t.test('a native batch nft refuses for another reason is not retried', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-f')) return { code: 1, stdout: '', stderr: 'Error: Could not process rule: No such file or directory\n' };
    return ok(RULESET);
  });
  const err = (await d.ensure([web], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /No such file or directory/);
  t.equal(calls.length, 2);
});

t.test('an opening id that cannot travel in an nft comment is refused before anything is written', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    return ok(RULESET);
  });
  t.equal(await code(d.ensure([{ ...web, id: 'x'.repeat(200) }], [])), 'MESHP_FIREWALL_FAILED');
  t.equal(await code(d.ensure([{ ...web, id: 'a"b' }], [])), 'MESHP_FIREWALL_FAILED');
  t.notOk(
    calls.some((c) => c.includes('-f')),
    'no batch was sent',
  );
});

t.test('plugin options are validated when constructed', async (t) => {
  t.throws(() => new NftablesPlugin({ netns: 'a b' }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new NftablesPlugin({ configFile: 'etc/nftables.conf' }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new NftablesPlugin({ privateRange: 'nope' }), { code: 'MESHP_DECLARATION_INVALID' });
});
