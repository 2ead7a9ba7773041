/**
 * Issue 25, the resolver's parts that need no socket: the machine's found nameservers read from its
 * resolv.conf, the port declared from the private range only, the names built from a view alone,
 * and the line `host status` and `doctor --local` print.
 */
import t from 'tap';
import type { Plan } from '@meshp/core';
import { nameTable, nameserversOf, withDnsOpenings } from '@meshp/dns-resolver';
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
      declaration: { apiVersion: 'meshp/v1', node: 'me', mode: 1, modules: [], convergePreviewId: '' },
    },
  });
  t.equal(table.domain, 'lab.mesh');
  t.same(table.names.get('web.lab.mesh'), { a: ['100.96.0.2'], aaaa: ['fd00::2'] });
  t.same(table.names.get('me.lab.mesh'), { a: ['100.96.0.1'], aaaa: [] }, 'its own name, its address without the prefix');
  t.equal(table.names.get('www.lab.mesh')?.cname, 'web.lab.mesh');
  t.equal(table.names.size, 3);
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
