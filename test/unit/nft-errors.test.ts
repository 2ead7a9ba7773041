import { readFileSync, writeFileSync } from 'node:fs';
import t from 'tap';
import { Host, MeshpError, type Opening } from '@meshp/core';
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
  for (const out of ['{"nftables": [', 'not json', '{"other": []}', '{"nftables": [{"rule": {"family": "inet", "table": "f"}}]}', '{"nftables": [{"table": {"family": "atlantis", "name": "x"}}]}']) {
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
  const direct = new NftablesDriver({ runner: localRunner(), spawner: localSpawner(), root: '/', configFile: '/etc/nftables.conf', bin: 'nft-not-installed-here' });
  t.equal(await code(direct.openings()), 'MESHP_FIREWALL_TOOL_MISSING');
  const wrapped = driver(async () => ({ code: 127, stdout: '', stderr: 'nsenter: failed to execute nft: No such file or directory' }));
  t.equal(await code(wrapped.ensure([web], [])), 'MESHP_FIREWALL_TOOL_MISSING');
});

t.test('a missing nft is a sighting without a driver, not a crash of detection', async (t) => {
  const host = new Host({ root: '/nonexistent' }).use(new NftablesPlugin({ bin: 'nft-not-installed-here' }));
  t.equal((await host.firewall())?.kind, 'none');
  t.match(host.firewallSightings(), [{ kind: 'nftables', active: false, summary: 'nft is not installed' }]);
});

t.test('a batch nft accepts but does not apply (exit 0, nothing echoed) is MESHP_FIREWALL_FAILED', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    return ok(argv.includes('list') ? RULESET : '');
  });
  const err = (await d.ensure([web2], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /did not echo 2 of its 2 rules/);
  t.same(
    calls.map((c) => c.slice(0, 4).join(' ')),
    ['nft -j list ruleset', 'nft -e -a -f'],
    're-listed right before the one batch, which is echoed',
  );
  t.match(calls[1]![4], /meshp-nft-.*\.nft$/, 'the batch goes through a file, never stdin');
});

t.test('a batch echoed only in part is MESHP_FIREWALL_FAILED naming what is missing', async (t) => {
  const d = driver(async (argv, o) => {
    if (argv.includes('list')) return ok(RULESET);
    const text = readFileSync(argv[argv.length - 1]!, 'utf8');
    const first = text.split('\n')[0]!;
    const echo = `${first} # handle 7\n# new generation 9 by process 1 (nft)\n`;
    if (o?.stdoutFile) writeFileSync(o.stdoutFile, echo);
    return ok(o?.stdoutFile ? '' : echo);
  });
  const err = (await d.ensure([web2], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /did not echo 1 of its 2 rules/);
  t.match(err?.details, { missing: ['inet filter input|meshp:web/incoming/tcp/9000'] });
});

t.test('when nft cannot parse the native batch, the same batch goes as JSON and is checked by a re-list', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-e')) return { code: 1, stdout: '', stderr: 'x.nft:1:1-3: Error: syntax error, unexpected junk\n' };
    return ok(argv.includes('list') ? RULESET : '');
  });
  const err = (await d.ensure([web], []).catch((e: unknown) => e)) as MeshpError;
  t.equal(err?.code, 'MESHP_FIREWALL_FAILED');
  t.match(err?.message, /still differs/, 'the fake applies nothing: the re-list sees it');
  t.same(
    calls.map((c) => c.slice(0, 3).join(' ')),
    ['nft -j list', 'nft -e -a', 'nft -j -f', 'nft -j list'],
  );
});

t.test('a native batch nft refuses for another reason is not retried', async (t) => {
  const calls: string[][] = [];
  const d = driver(async (argv) => {
    calls.push([...argv]);
    if (argv.includes('-e')) return { code: 1, stdout: '', stderr: 'Error: Could not process rule: No such file or directory\n' };
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
  t.notOk(calls.some((c) => c.includes('-f')), 'no batch was sent');
});

t.test('plugin options are validated when constructed', async (t) => {
  t.throws(() => new NftablesPlugin({ netns: 'a b' }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new NftablesPlugin({ configFile: 'etc/nftables.conf' }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new NftablesPlugin({ privateRange: 'nope' }), { code: 'MESHP_DECLARATION_INVALID' });
});
