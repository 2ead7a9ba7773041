import t, { type Test } from 'tap';
import { readFile, rm } from 'node:fs/promises';
import type { Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesDriver, NftablesPlugin, localRunner, localSpawner, netnsPrefix, type NftablesRetired, type Runner } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, DOCKER_NAT, SERVER_CLIENT, SERVER_OUTSIDE, lab, reachable, ruleLines, type Lab } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const web: Opening = { id: 'web/incoming/tcp/9000', module: 'web', port: 9000, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };
  const store: Opening = { id: 'store/forwarded/tcp/5432', module: 'store', port: 5432, protocol: 'tcp', from: [], path: 'forwarded', action: 'drop' };

  async function bed(t: Test): Promise<{ l: Lab; driver: NftablesDriver }> {
    const l = await lab(t);
    await l.load(DOCKER_NAT);
    const host = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name, privateRange: CLIENT_NET }));
    return { l, driver: (await host.firewall()) as NftablesDriver };
  }

  const docker = (lines: string[]) => lines.filter((x) => x.includes('docker-bridges'));
  const inFilter = (x: string) => x.includes('"table":"filter"') || x.includes('"name":"filter"');
  const mesh = (lines: string[]) => lines.filter((x) => /"(table|name)":"meshp"/.test(x));

  t.test('retire deletes only the found tables; reenable brings them back from the untouched config', async (t) => {
    const { l, driver } = await bed(t);
    await driver.ensure([web], [store]);
    const config = await readFile(l.configFile);
    const start = await ruleLines(l);

    const state = (await driver.retire()) as NftablesRetired;
    t.same(state.tables, ['inet filter']);
    t.equal(state.configFile, l.configFile);
    const retired = await ruleLines(l);
    t.notOk(retired.some(inFilter), 'their table is gone');
    t.same(docker(retired), docker(start), "Docker's table untouched");
    t.same(mesh(retired), mesh(start), "the mesh's table untouched");
    t.same(await readFile(l.configFile), config, 'config byte-identical');

    await driver.reenable(state);
    const back = await ruleLines(l);
    t.same(docker(back), docker(start), "Docker's table untouched by the config's flush ruleset");
    t.same(mesh(back), mesh(start), "the mesh's table untouched");
    t.same(await readFile(l.configFile), config, 'config still byte-identical');
    const theirs = (lines: string[]) => lines.filter((x) => inFilter(x) && !x.includes('meshp:'));
    t.same(theirs(back), theirs(start), 'their table is back as the config defines it (named set included)');
    t.match(await l.nft(['list', 'set', 'inet', 'filter', 'admins']), /192\.0\.2\.0\/24/);
    t.same(await driver.ensure([web], [store]), { added: [web.id], removed: [] }, 'the next ensure puts our rule back in it');
  });

  t.test('a found firewall loaded by hand, with no config file: retire records it live, reenable brings it back from that record', async (t) => {
    const { l, driver } = await bed(t);
    await driver.ensure([web], [store]);
    const start = await ruleLines(l);
    await rm(l.configFile);
    const state = (await driver.retire()) as NftablesRetired;
    t.ok(state.live.length > 0, 'the live tables recorded before they were deleted');
    t.notOk(
      state.live.some((o) => JSON.stringify(o).includes('meshp:')),
      "the mesh's marked rules are not part of the original",
    );
    t.notOk((await ruleLines(l)).some(inFilter), 'retired: their table is gone');
    await driver.reenable(state);
    const theirs = (lines: string[]) => lines.filter((x) => inFilter(x) && !x.includes('meshp:'));
    t.same(theirs(await ruleLines(l)), theirs(start), 'their table is back rule for rule, its named set included');
    t.match(await l.nft(['list', 'set', 'inet', 'filter', 'admins']), /192\.0\.2\.0\/24/);
  });

  t.test('the derived table drops by default and lets the openings and established traffic through', async (t) => {
    const { l, driver } = await bed(t);
    await l.serve(l.server, 9000);
    await l.serve(l.server, 8080);
    const state = await driver.retire();
    t.ok(await reachable(l.outside, SERVER_OUTSIDE, 8080), 'retired: nothing filters');
    await driver.loadDerived({ openings: [web], refusals: [store], privateRange: CLIENT_NET });
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'declared opening reachable from its range');
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, 9000), 'not from outside');
    t.notOk(await reachable(l.client, SERVER_CLIENT, 8080), 'an undeclared port is closed');
    const text = await l.nft(['list', 'table', 'inet', 'meshp_derived']);
    t.match(text, /policy drop/);
    t.match(text, /ct state established,related accept/);
    t.match(text, /comment "meshp:store\/forwarded\/tcp\/5432"/);
    await driver.loadDerived({ openings: [web], refusals: [store], privateRange: CLIENT_NET });
    t.equal(await l.nft(['list', 'table', 'inet', 'meshp_derived']), text, 'loading twice replaces the table whole');
    t.same(await driver.openings(), [], 'the derived table is not counted as openings in found tables');
    await driver.unloadDerived();
    t.notMatch(await l.nft(['list', 'tables']), /meshp_derived/);
    await driver.unloadDerived();
    await driver.reenable(state);
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 're-enabled: their firewall closes 9000 again');
    t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'and allows 8080 again');
  });

  t.test('the same derived filter again writes nothing; a changed filter, or the table changed by hand, loads it again', async (t) => {
    const l = await lab(t);
    const inner = localRunner(netnsPrefix(l.server.name));
    const batches: string[][] = [];
    const counting: Runner = async (argv, o) => {
      if (argv.includes('-f')) batches.push([...argv]);
      return inner(argv, o);
    };
    const driver = new NftablesDriver({ runner: counting, spawner: localSpawner(), root: l.root, configFile: '/etc/nftables.conf', privateRange: CLIENT_NET });
    const filter = { openings: [web], refusals: [store], privateRange: CLIENT_NET };
    await driver.loadDerived(filter);
    t.equal(batches.length, 1, 'loaded once');
    const text = await l.nft(['list', 'table', 'inet', 'meshp_derived']);
    await driver.loadDerived(filter);
    await driver.loadDerived(structuredClone(filter));
    t.equal(batches.length, 1, 'the same filter twice more: the table is there as loaded, nothing written');
    t.equal(await l.nft(['list', 'table', 'inet', 'meshp_derived']), text);

    await driver.loadDerived({ ...filter, openings: [{ ...web, port: 9001, id: 'web/incoming/tcp/9001' }] });
    t.equal(batches.length, 2, 'a changed filter is loaded');
    t.match(await l.nft(['list', 'table', 'inet', 'meshp_derived']), /tcp dport 9001 accept/);

    const rules = JSON.parse(await l.nft(['-j', '-a', 'list', 'chain', 'inet', 'meshp_derived', 'input'])) as {
      nftables: { rule?: { handle: number; comment?: string } }[];
    };
    const opening = rules.nftables.find((x) => x.rule?.comment?.includes('9001'))!.rule!;
    await l.nft(['delete', 'rule', 'inet', 'meshp_derived', 'input', 'handle', String(opening.handle)]);
    await driver.loadDerived({ ...filter, openings: [{ ...web, port: 9001, id: 'web/incoming/tcp/9001' }] });
    t.equal(batches.length, 3, 'a rule deleted by hand: loaded again');
    t.match(await l.nft(['list', 'table', 'inet', 'meshp_derived']), /tcp dport 9001 accept/, 'and the rule is back');

    await l.nft(['flush', 'ruleset']);
    await driver.loadDerived({ ...filter, openings: [{ ...web, port: 9001, id: 'web/incoming/tcp/9001' }] });
    t.equal(batches.length, 4, 'the table gone (a flush, a reboot): loaded again');

    await driver.unloadDerived();
    await driver.loadDerived({ ...filter, openings: [{ ...web, port: 9001, id: 'web/incoming/tcp/9001' }] });
    t.equal(batches.length, 6, 'unloaded (one batch), then loaded again');
  });

  t.test('watch calls back when someone else reloads, not for our own ensure', async (t) => {
    const { l, driver } = await bed(t);
    let calls = 0;
    const w = driver.watch((): void => {
      calls++;
    });
    t.teardown(() => w.close());
    await new Promise((r) => setTimeout(r, 300));
    await driver.ensure([web], [store]);
    await new Promise((r) => setTimeout(r, 500));
    t.equal(calls, 0, 'our own changes are not news');
    await l.reload();
    for (let i = 0; i < 30 && calls === 0; i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 400));
    t.equal(calls, 1, 'a reload is reported once (debounced)');
    await driver.ensure([web], [store]);
    t.same((await driver.openings()).map((o) => o.id).sort(), [store.id, web.id], 'mended');
    w.close();
  });
}
