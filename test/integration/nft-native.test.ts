import t from 'tap';
import type { Opening } from '@meshp/core';
import { markedId, nativePlan, parseRuleset, parseShape, shapesFor, type Addition, type Shape } from '@meshp/firewall-nftables';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('every rule ensure writes, sent in nft syntax, lists back as the shape it was built from', async (t) => {
    const ns = await netns(t, `${runPrefix('nq')}n`);
    const web: Opening = {
      id: 'web/incoming/tcp/9000',
      module: 'web',
      port: 9000,
      protocol: 'tcp',
      from: ['10.8.0.0/16', '10.9.0.0/24', 'fd00::/8'],
      path: 'incoming',
      action: 'accept',
    };
    const refusal: Opening = { ...web, id: 'r/forwarded/tcp/22', path: 'forwarded', action: 'drop', from: [] };
    const cases: [Opening, 'inet' | 'ip' | 'ip6', string?][] = [
      [web, 'inet'],
      [web, 'ip'],
      [web, 'ip6'],
      [{ ...web, id: 'any', from: [] }, 'inet'],
      [{ ...web, id: 'one', from: ['10.8.0.1', 'fd00::1'] }, 'inet'],
      [{ ...web, id: 'fwd', from: ['0.0.0.0/0'], protocol: 'udp', path: 'forwarded' }, 'inet'],
      [{ ...web, id: 'fwd6', path: 'forwarded' }, 'ip6'],
      [refusal, 'inet', '10.70.0.0/16'],
      [{ ...refusal, id: 'r2', except: ['10.77.0.0/24', '10.78.0.0/24', 'fd77::/16'] }, 'inet'],
      [{ ...refusal, id: 'r3' }, 'inet'],
    ];
    const setup = ['add table inet filter', 'add table ip filter4', 'add table ip6 filter6'];
    const want = new Map<string, Shape[]>();
    const additions: Addition[] = [];
    for (const [o, family, priv] of cases) {
      const table = family === 'inet' ? 'filter' : family === 'ip' ? 'filter4' : 'filter6';
      const chain = `c_${o.id.replace(/\W/g, '_')}_${family}`;
      setup.push(`add chain ${family} ${table} ${chain}`);
      for (const shape of shapesFor(o, family, priv)) {
        additions.push({ shape, chain: { family, table, name: chain }, before: null });
        want.set(`${family} ${table} ${chain}`, [...(want.get(`${family} ${table} ${chain}`) ?? []), shape]);
      }
    }
    const text = nativePlan({ head: [], additions });
    t.ok(text, 'every case renders');
    await ns.exec('nft', ['-f', '/dev/stdin'], `${setup.join('\n')}\n${text!}`);
    const rs = parseRuleset((await ns.exec('nft', ['-j', 'list', 'ruleset'])).stdout);
    const got = new Map<string, Shape[]>();
    for (const r of rs.rules) {
      const key = `${r.family} ${r.table} ${r.chain}`;
      got.set(key, [...(got.get(key) ?? []), parseShape(r, markedId(r)!)!]);
    }
    for (const [key, shapes] of want) t.same(got.get(key), shapes, key);
  });
}
