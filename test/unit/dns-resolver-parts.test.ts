/**
 * Issue 25, the resolver's parts that need no socket: the machine's found nameservers read from its
 * resolv.conf, the port declared from the private range only, the names built from a view alone,
 * and the line `host status` and `doctor --local` print.
 */
import t from 'tap';
import type { Plan } from '@meshp/core';
import { nameTable, nameserversOf, patchTable, withDnsOpenings, type NamedView } from '@meshp/dns-resolver';
import { dnsLine } from '../../bin/src/host/render.js';

const plan = (kind: string | null): Plan => ({ node: 'a', mode: 'adopted', actions: [], firewall: { openings: [], refusals: [], kind } });

t.test("the found nameservers are the resolv.conf's nameserver lines, in order, nothing else", async (t) => {
  const text = '# generated\nsearch corp.example\nnameserver 127.0.0.53\n  nameserver fd00::53\nnameserver not-an-ip\noptions edns0\n';
  t.same(nameserversOf(text), [
    { address: '127.0.0.53', port: 53 },
    { address: 'fd00::53', port: 53 },
  ]);
  t.same(nameserversOf(''), []);
});

t.test('the resolver port is opened from the private range only, UDP and TCP, through the plan', async (t) => {
  const p = withDnsOpenings(plan('nftables'), { privateRange: '100.96.0.0/16' }, 53);
  t.same(
    p.firewall.openings.map((o) => [o.id, o.from]),
    [
      ['dns/incoming/udp/53', ['100.96.0.0/16']],
      ['dns/incoming/tcp/53', ['100.96.0.0/16']],
    ],
  );
  t.same(
    p.actions.map((a) => [a.kind, a.op, a.module]),
    [
      ['opening', 'create', 'dns'],
      ['opening', 'create', 'dns'],
    ],
  );
  t.equal(withDnsOpenings(p, { privateRange: '100.96.0.0/16' }, 53).firewall.openings.length, 2, 'not twice');
  t.same(withDnsOpenings(plan('none'), { privateRange: '100.96.0.0/16' }, 53).firewall.openings, [], 'no firewall plugin: nothing to open');
  t.same(withDnsOpenings(plan('nftables'), {}, 53).firewall.openings, [], 'no range known: nothing opened to anywhere');
});

t.test("a view's names: its peers, itself, the records; the domain from the network when none is set", async (t) => {
  const table = nameTable({
    network: 'lab',
    peers: new Map([['web', { peer: { id: 'web', nodeKey: 'k', addresses: ['100.96.0.2', 'fd00::2'], tags: [], endpoints: [], inboundOnly: false } }]]),
    components: {
      dns: { nameservers: [], searchDomains: [], domain: '', splits: [], records: [{ name: 'www', addresses: [], cname: 'web' }] },
      tunnel: { address: '100.96.0.1/16', listenPort: 51820, mtu: 1280, keepaliveSeconds: 25 },
      declaration: { apiVersion: 'meshp/v1', node: 'me', mode: 1, modules: [], convergePreviewId: '', untakes: [], releases: [] },
    },
  });
  t.equal(table.domain, 'lab.mesh');
  t.same(table.names.get('web.lab.mesh'), { a: ['100.96.0.2'], aaaa: ['fd00::2'] });
  t.same(table.names.get('me.lab.mesh'), { a: ['100.96.0.1'], aaaa: [] }, 'its own name, its address without the prefix');
  t.equal(table.names.get('www.lab.mesh')?.cname, 'web.lab.mesh');
  t.equal(table.names.size, 3);
});

t.test('a change of peers alone patches the table to what a build from the view would be, whatever the order of joins, renames and removals', async (t) => {
  const peerOf = (id: string, n: number) => ({
    peer: { id, nodeKey: 'k', addresses: [`100.96.${n >> 8}.${n & 255}`], tags: [], endpoints: [], inboundOnly: false },
  });
  const peers = new Map<string, ReturnType<typeof peerOf>>();
  const view: NamedView = {
    network: 'lab',
    peers,
    components: {
      dns: { nameservers: [], searchDomains: [], domain: '', splits: [], records: [{ name: 'printer', addresses: ['100.96.9.9'], cname: '' }] },
      tunnel: { address: '100.96.0.1/16', listenPort: 51820, mtu: 1280, keepaliveSeconds: 25 },
      declaration: { apiVersion: 'meshp/v1', node: 'me', mode: 1, modules: [], convergePreviewId: '', untakes: [], releases: [] },
    },
  };
  for (let i = 0; i < 50; i++) peers.set(`p${i}`, peerOf(`p${i}`, i));
  const table = nameTable(view);
  let seed = 7;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
  for (let round = 0; round < 500; round++) {
    const touched: string[] = [];
    for (let k = 0, m = 1 + rand(3); k < m; k++) {
      // A peer named as the record (it shadows it, and gives it back when it goes) and one named as the node itself now and then.
      const id = rand(10) === 0 ? 'printer' : rand(40) === 0 ? 'me' : `p${rand(80)}`;
      if (peers.has(id) && rand(2) === 0) peers.delete(id);
      else peers.set(id, peerOf(id, 100 + rand(100)));
      touched.push(id);
    }
    patchTable(table, view, touched);
    const built = nameTable(view);
    if (JSON.stringify([...table.names].sort()) !== JSON.stringify([...built.names].sort())) {
      t.fail(`round ${round}: the patched table differs from the built one`);
      return;
    }
  }
  t.pass('500 changes: patched and built tables the same each time');
  t.same(table.names.get('printer.lab.mesh'), nameTable(view).names.get('printer.lab.mesh'));
});

t.test('host status says how DNS is integrated: not, the resolver configuration held', async (t) => {
  const line = dnsLine({
    dns: {
      address: '100.96.0.1',
      port: 53,
      domain: 'lab.mesh',
      names: 3,
      upstreams: ['10.0.0.2'],
      upstreamsFrom: 'found',
      lastError: null,
      lastAnswerError: '',
    },
  });
  t.equal(
    line,
    "dns: answers lab.mesh on 100.96.0.1:53 (3 names), forwards to 10.0.0.2 (the machine's own); DNS not integrated: the resolver configuration is held",
  );
  t.match(dnsLine({ dns: { address: '', lastError: 'listen EADDRINUSE 100.96.0.1:53' } }) ?? '', /not answering: listen EADDRINUSE/);
  t.equal(dnsLine({}), null);
});
