/**
 * The nftables plugin speaks libnftables in a thread of its own (ADR 0048; plugins/firewall-nftables
 * libnft.ts), against real nftables in namespaces made here: by default, and so in CI, the plugin
 * speaks the library, not a process per command; what it reads and writes, and what it says of a
 * batch nft refuses, are what the nft tool reads, writes and says; a namespace deleted and made
 * again under the same name is spoken to anew; the thread ends with its namespace (it would hold
 * it alive) and never holds a process open.
 */
import { execFile } from 'node:child_process';
import t from 'tap';
import { isMeshpError } from '@meshp/core';
import { LibNft, NftablesPlugin, requestOf } from '@meshp/firewall-nftables';
import { until } from '../helpers/budget.js';
import { labAvailable, netns, runPrefix, sh, wire } from '../helpers/netns.js';

const FOUND = `table inet filter {
  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept
    iif "lo" accept
    tcp dport 22 accept
  }
}
`;

t.test('nft arguments as a library request: the flags, then a file or the words; anything else is left to the tool', async (t) => {
  t.same(requestOf(['-j', 'list', 'ruleset']), { flags: 16, cmd: 'list ruleset' });
  t.same(requestOf(['-e', '-f', '/dev/shm/x.nft']), { flags: 32, file: '/dev/shm/x.nft' });
  t.same(requestOf(['-e', '-j', '-f', '/x']), { flags: 48, file: '/x' });
  t.equal(requestOf(['-a', 'list', 'ruleset']), undefined, 'a flag the engine does not carry');
  t.equal(requestOf(['-f']), undefined, 'no file');
  t.equal(requestOf(['-f', '/x', 'more']), undefined, 'words after the file');
  t.equal(requestOf(['-j']), undefined, 'no command');
});

if (!labAvailable()) t.plan(1, 'the rest needs root to build network namespaces');
else {
  const prefix = runPrefix('lib');

  t.test('the default engine is the library, and it reads, writes and refuses as the nft tool does', async (t) => {
    const ns = await netns(t, `${prefix}a`);
    await ns.exec('nft', ['-f', '-'], FOUND);
    const lib = new NftablesPlugin({ netns: ns.name }).driver('/nonexistent');
    const tool = new NftablesPlugin({ netns: ns.name, engine: 'process' }).driver('/nonexistent');
    t.equal(lib.nft.engine(), undefined, 'nothing spoken before the first command');
    const [a, b] = [await lib.nft.listText(), await tool.nft.listText()];
    t.equal(lib.nft.engine(), 'libnftables', 'the plugin spoke the library (CI has it: no silent fallback)');
    t.equal(tool.nft.engine(), 'process');
    t.equal(a, b, 'the same ruleset text as `nft -j list ruleset`');
    t.match(a, /"right": 22/, 'and it is the namespace’s ruleset');

    // A write through each: both in the kernel, in order.
    await lib.nft.applyFile('add rule inet filter input tcp dport 80 accept\n');
    await tool.nft.applyFile('add rule inet filter input tcp dport 81 accept\n');
    const listed = (await ns.exec('nft', ['list', 'chain', 'inet', 'filter', 'input'])).stdout;
    t.match(listed, /tcp dport 22 accept\s+tcp dport 80 accept\s+tcp dport 81 accept/, 'both rules written, the library’s first');

    // The echo of a batch (`nft -e`): what the receipt is read from.
    const echoed = await lib.nft.applyNative('add rule inet filter input tcp dport 82 accept\n', true);
    t.match(String(echoed), /^add rule inet filter input tcp dport 82 accept$/m, 'the batch echoed back');

    // Refusals: the same code, exit and message from both.
    for (const [what, text] of [
      ['a rule into a chain that is not there', 'add rule inet filter nosuch tcp dport 80 accept\n'],
      ['a syntax error', 'this is not nft\n'],
    ] as const) {
      const said: string[] = [];
      for (const d of [lib, tool]) {
        try {
          await d.nft.applyFile(text);
          t.fail(`${what}: accepted`);
        } catch (e) {
          t.ok(isMeshpError(e, 'MESHP_FIREWALL_FAILED'), `${what}: MESHP_FIREWALL_FAILED`);
          const details = (e as { details?: { exit?: number; stderr?: string } }).details;
          t.equal(details?.exit, 1, `${what}: exit 1`);
          said.push(String(details?.stderr).replace(/meshp-nft-[\w-]+\.nft/, 'FILE'));
        }
      }
      t.equal(said[0], said[1], `${what}: the library says what nft says`);
    }
    t.equal(await lib.nft.applyNative('this is not nft\n'), false, 'a batch nft cannot parse is told apart (then sent as JSON)');
    t.same(await lib.nft.receipt(), [], 'no receipt set: none read');
    const after = (await ns.exec('nft', ['list', 'chain', 'inet', 'filter', 'input'])).stdout;
    t.same(after.match(/tcp dport \d+/g), ['tcp dport 22', 'tcp dport 80', 'tcp dport 81', 'tcp dport 82'], 'nothing else written');
  });

  t.test('a namespace made again under the same name is spoken to anew; the thread ends with its namespace', async (t) => {
    const name = `${prefix}b`;
    const peer = await netns(t, `${prefix}p`);
    const first = await netns(t, name);
    await wire(first, '10.77.0.1/30', peer, '10.77.0.2/30', `${prefix}w`);
    const driver = new NftablesPlugin({ netns: name }).driver('/nonexistent');
    await driver.nft.applyFile('add table inet first\n');
    t.equal(driver.nft.engine(), 'libnftables');
    t.match((await first.exec('nft', ['list', 'tables'])).stdout, /table inet first/);

    // The namespace deleted: its veth end in the peer goes only once nothing holds the namespace,
    // so the peer's end going says the library's thread let it go.
    await sh('ip', ['netns', 'del', name]);
    await until('the deleted namespace to go (its veth pair with it)', async () => !(await peer.exec('ip', ['-o', 'link'])).stdout.includes(`${prefix}wb`), 20);
    t.pass('the thread in the deleted namespace ended, and the namespace with it');
    t.equal(await LibNft.for(name), null, 'no thread for a namespace that is not there');
    try {
      await driver.nft.listText();
      t.fail('listed a namespace that is not there');
    } catch (e) {
      t.ok(isMeshpError(e, 'MESHP_FIREWALL_FAILED'), `a namespace that is not there is a coded failure (nsenter's): ${(e as Error).message}`);
    }

    // Made again under the same name: the same driver writes into the new one.
    const second = await netns(t, name);
    t.equal((await second.exec('nft', ['list', 'tables'])).stdout, '', 'the new namespace starts empty');
    await driver.nft.applyFile('add table inet second\n');
    t.equal((await second.exec('nft', ['list', 'tables'])).stdout.trim(), 'table inet second', 'written into the new namespace, not the old');
  });

  t.test('the thread never holds the process open', async (t) => {
    const ns = await netns(t, `${prefix}c`);
    const script = `import { NftablesPlugin } from '@meshp/firewall-nftables';
const d = new NftablesPlugin({ netns: ${JSON.stringify(ns.name)} }).driver('/nonexistent');
await d.nft.applyFile('add table inet held\\n');
console.log(d.nft.engine(), (await d.nft.listText()).includes('"held"'));`;
    let out = '';
    const child = execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() }, (_err, stdout, stderr) => {
      out = stdout + stderr;
    });
    t.teardown(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    await until('the child to exit by itself', () => child.exitCode !== null, 30);
    t.equal(child.exitCode, 0, 'it exited 0');
    t.equal(out.trim(), 'libnftables true', 'the child spoke the library, then exited by itself with nothing left to do');
  });
}
