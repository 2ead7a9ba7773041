/**
 * A converged node leaving (issue 33 item 9), on a real nftables machine (a lab namespace): the
 * found firewall it retired is re-enabled from its configuration before the derived filter goes
 * (the return's order: never less protected on the way), so the machine ends as it was found —
 * neither left closed by a removed mesh's filter nor opened. The node is converged by
 * `meshp host converge` on the same state folder an agent keeps; the enrolment record an agent
 * would have written is put in its store (the controller has no part in a leave).
 */
import t, { type Test } from 'tap';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Host } from '@meshp/core/host';
import { ENROLMENT_KEY } from '@meshp/core/agent';
import { SqliteStatePlugin } from '@meshp/state-sqlite';
import { meshpIn } from '../helpers/cli.js';
import { fileBudget } from '../helpers/budget.js';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable } from '../helpers/nft-lab.js';

fileBudget(60);

const skip = labAvailable() ? false : 'needs root for network namespaces';

async function converged(t: Test, o: { found: boolean }) {
  const l = await lab(t);
  if (!o.found) {
    await l.nft(['flush', 'ruleset']);
    rmSync(l.configFile);
  }
  const state = join(l.root, '..', `${l.prefix}-state`);
  t.teardown(async () => (await import('node:fs/promises')).rm(state, { recursive: true, force: true }));
  const declFile = join(l.root, 'declaration.json');
  writeFileSync(
    declFile,
    JSON.stringify({
      apiVersion: 'meshp/v1',
      node: 'server',
      mode: 'adopted',
      settings: { ports: {} },
      modules: [{ name: 'web', taken: false, openings: [{ port: 8080, path: 'incoming', from: [CLIENT_NET] }] }],
    }),
  );
  const configBefore = o.found ? readFileSync(l.configFile) : null;
  const foundBefore = o.found ? await l.nft(['list', 'table', 'inet', 'filter']) : null;
  await l.serve(l.server, 8080);
  await l.serve(l.server, 9000);
  const tables = async () =>
    (JSON.parse(await l.nft(['-j', 'list', 'tables'])).nftables as Record<string, { family: string; name: string }>[])
      .filter((o) => o.table)
      .map((o) => `${o.table!.family} ${o.table!.name}`);
  const common = ['--state', state, '--root', l.root];
  const r = await meshpIn(l.server, ['host', 'converge', ...common, '--firewall', 'nftables', '--declaration', declFile, '--yes']);
  t.equal(r.code, 0, r.err);
  t.same(
    (await tables()).filter((x) => x.startsWith('inet')),
    ['inet meshp_derived'],
    `converged: the derived filter alone${o.found ? ', the found table retired' : ''}`,
  );
  const h = new Host({ stateDir: state }).use(new SqliteStatePlugin());
  await (await h.state()).setValue(ENROLMENT_KEY, { network: 'default', node: 'server', credential: 'x', mode: 'converged', addresses: [] });
  await h.close();
  const leave = (...flags: string[]) => meshpIn(l.server, ['agent', 'leave', ...common, '--firewall', 'nftables', ...flags]);
  return { l, tables, leave, configBefore, foundBefore };
}

t.test('agent leave on a converged node gives the machine back to its found firewall', { skip }, async (t) => {
  const { l, tables, leave, configBefore, foundBefore } = await converged(t, { found: true });

  const p = await leave('--preview');
  t.equal(p.code, 0, p.err);
  t.match(p.out, '  - the derived filter, after the found nftables firewall it replaced is re-enabled from its configuration\n');
  t.same(
    (await tables()).filter((x) => x.startsWith('inet')),
    ['inet meshp_derived'],
    'the preview changed nothing',
  );

  const y = await leave('--yes');
  t.equal(y.code, 0, y.err);
  t.same(
    (await tables()).filter((x) => x.startsWith('inet')),
    ['inet filter'],
    'the found table is back, the derived filter gone',
  );
  t.equal(await l.nft(['list', 'table', 'inet', 'filter']), foundBefore, 'the found table as its configuration defines it');
  t.same(readFileSync(l.configFile), configBefore, 'its configuration byte for byte');
  t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'what the found firewall lets in still comes in');
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'what it drops is dropped again: not opened');
});

t.test('converged where no firewall was found: the derived filter stays, said so (unloading it would open every port)', { skip }, async (t) => {
  const { l, tables, leave } = await converged(t, { found: false });
  const y = await leave('--yes');
  t.equal(y.code, 0, y.err);
  t.match(y.out, 'kept:\n  - the derived filter: no firewall was found on this machine when it converged, and unloading the filter would open every port');
  t.same(
    (await tables()).filter((x) => x.startsWith('inet')),
    ['inet meshp_derived'],
    'the derived filter is still loaded',
  );
  t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'the declared port still answers');
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'the undeclared port is not opened');
});
