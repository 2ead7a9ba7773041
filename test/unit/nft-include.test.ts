import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { resolveIncludes } from '@meshp/firewall-nftables';

async function root(t: Test, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'nq-include-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return dir;
}

/** The config as nft would read it: every include replaced by the file it names, recursively. */
async function inline(file: string): Promise<string> {
  const out: string[] = [];
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    const m = /^\s*include "([^"]+)"$/.exec(line);
    out.push(m ? await inline(m[1]!) : line);
  }
  return out.join('\n');
}

t.test('includes of a config under a root are read under that root, wildcards expanded in order', async (t) => {
  const r = await root(t, {
    'etc/nftables.conf': 'flush ruleset\ninclude "/etc/nftables.d/*.nft"\n\tinclude "extra.nft"\ninclude "./srv/last.nft"\n',
    'etc/nftables.d/20-b.nft': 'table inet b {}',
    'etc/nftables.d/10-a.nft': 'include "/etc/nftables.d/nested.inc"',
    'etc/nftables.d/nested.inc': 'table inet a {}',
    'etc/nftables.d/.hidden.nft': 'table inet hidden {}',
    'etc/extra.nft': 'table inet extra {}',
    'srv/last.nft': 'table inet last {}',
  });
  const resolved = await resolveIncludes(r, join(r, 'etc/nftables.conf'));
  t.teardown(() => resolved.cleanup());
  t.not(resolved.file, join(r, 'etc/nftables.conf'), 'a rewritten copy');
  t.equal(await inline(resolved.file), 'flush ruleset\ntable inet a {}\ntable inet b {}\ntable inet extra {}\ntable inet last {}\n');
  await resolved.cleanup();
  t.notOk(
    await readFile(resolved.file).then(
      () => true,
      () => false,
    ),
    'the copies are gone after cleanup',
  );
});

t.test('nothing to rewrite: the root "/" or a config without includes is used as it is', async (t) => {
  const r = await root(t, { 'etc/nftables.conf': 'table inet filter {}\n# include "/etc/x" in a comment\n' });
  t.equal((await resolveIncludes(r, join(r, 'etc/nftables.conf'))).file, join(r, 'etc/nftables.conf'));
  t.equal((await resolveIncludes('/', join(r, 'etc/nftables.conf'))).file, join(r, 'etc/nftables.conf'));
});

t.test('a missing include stays missing (nft reports it); wildcards in a directory and loops are refused', async (t) => {
  const r = await root(t, {
    'etc/missing.conf': 'include "/etc/nope.nft"\n',
    'etc/wild.conf': 'include "/etc/*/x.nft"\n',
    'etc/loop.conf': 'include "/etc/loop.conf"\n',
  });
  const missing = await resolveIncludes(r, join(r, 'etc/missing.conf'));
  t.teardown(() => missing.cleanup());
  t.equal((await readFile(missing.file, 'utf8')).trim(), `include "${join(r, 'etc/nope.nft')}"`);
  await t.rejects(resolveIncludes(r, join(r, 'etc/wild.conf')), { code: 'MESHP_FIREWALL_FAILED', message: /wildcards in a directory/ });
  await t.rejects(resolveIncludes(r, join(r, 'etc/loop.conf')), { code: 'MESHP_FIREWALL_FAILED', message: /deeper than/ });
});
