/**
 * Reachability through an nftables ruleset as it is now. Rule expressions are as `nft -j list
 * ruleset` (nftables 1.0) prints them for the nft syntax in each comment.
 */
import t from 'tap';
import type { Door } from '@meshp/core';
import { parseRuleset, reachOfRuleset } from '@meshp/firewall-nftables';

type Obj = Record<string, unknown>;
const dport = (proto: string, right: unknown) => ({ match: { op: '==', left: { payload: { protocol: proto, field: 'dport' } }, right } });
const saddr = (family: 'ip' | 'ip6', right: unknown, op = '==') => ({ match: { op, left: { payload: { protocol: family, field: 'saddr' } }, right } });
const prefix = (addr: string, len: number) => ({ prefix: { addr, len } });
const established = [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: ['established', 'related'] } }, { accept: null }];
const invalidDrop = [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'invalid' } }, { drop: null }];
const lo = [{ match: { op: '==', left: { meta: { key: 'iif' } }, right: 'lo' } }, { accept: null }];

function table(
  family: string,
  name: string,
  chains: { name: string; hook?: string; policy?: string; type?: string; rules?: { expr: Obj[]; comment?: string }[] }[],
): Obj[] {
  const out: Obj[] = [{ table: { family, name } }];
  for (const c of chains) {
    out.push({
      chain: { family, table: name, name: c.name, ...(c.hook ? { type: c.type ?? 'filter', hook: c.hook, prio: 0, policy: c.policy ?? 'accept' } : {}) },
    });
    for (const r of c.rules ?? []) out.push({ rule: { family, table: name, chain: c.name, expr: r.expr, ...(r.comment ? { comment: r.comment } : {}) } });
  }
  return out;
}
const rs = (...tables: Obj[][]) => parseRuleset(JSON.stringify({ nftables: tables.flat() }));
const socket = (port: number, protocol: 'tcp' | 'udp' = 'tcp'): Door => ({ port, protocol, path: 'incoming' });
const published = (port: number, targetPort?: number): Door => ({ port, protocol: 'tcp', path: 'forwarded', ...(targetPort ? { targetPort } : {}) });

// The lab's found firewall: input drops by default and allows 8080.
const found = table('inet', 'filter', [
  { name: 'input', hook: 'input', policy: 'drop', rules: [{ expr: established }, { expr: lo }, { expr: [dport('tcp', 8080), { accept: null }] }] },
]);

t.test('a port the found input chain accepts is open from anywhere, and mentioned', async (t) => {
  t.match(reachOfRuleset(rs(found), [socket(8080)])[0], { now: 'open', mentioned: true, port: 8080, path: 'incoming' });
});

t.test('a port the input chain does not accept before its drop policy is closed, and unmentioned', async (t) => {
  t.match(reachOfRuleset(rs(found), [socket(9000)])[0], { now: 'closed', mentioned: false });
});

t.test('a path with no base chain that drops is open from anywhere and unmentioned', async (t) => {
  const [r] = reachOfRuleset(rs(found), [published(18081, 80)]);
  t.same(r, { port: 18081, protocol: 'tcp', path: 'forwarded', now: 'open', mentioned: false }, 'no forward chain: Docker forwards it');
  t.match(reachOfRuleset(rs(), [socket(22)])[0], { now: 'open', mentioned: false }, 'an empty ruleset opens everything');
});

t.test('accept rules naming sources open the port only from them, both families', async (t) => {
  const fw = table('inet', 'filter', [
    {
      name: 'input',
      hook: 'input',
      policy: 'drop',
      rules: [
        { expr: [saddr('ip', prefix('10.0.0.0', 8)), dport('tcp', 22), { accept: null }] },
        { expr: [saddr('ip6', prefix('fd00::', 8)), dport('tcp', 22), { accept: null }] },
        { expr: [saddr('ip', { set: [prefix('10.1.0.0', 16), '192.168.1.5'] }), dport('th', 3000), { accept: null }] },
      ],
    },
  ]);
  const [ssh, app, appUdp] = reachOfRuleset(rs(fw), [socket(22), socket(3000), socket(3000, 'udp')]);
  t.same(ssh, { port: 22, protocol: 'tcp', path: 'incoming', now: 'open-from', from: ['10.0.0.0/8', 'fd00::/8'], mentioned: true });
  t.match(app, { now: 'open-from', from: ['10.1.0.0/16', '192.168.1.5/32'] });
  t.match(appUdp, { now: 'open-from', from: ['10.1.0.0/16', '192.168.1.5/32'] }, '`th dport` is either protocol');
});

t.test('port sets and ranges are read; a named set cannot be, and opens nothing', async (t) => {
  const fw = table('inet', 'filter', [
    {
      name: 'input',
      hook: 'input',
      policy: 'drop',
      rules: [{ expr: [dport('tcp', { set: [80, { range: [1000, 2000] }] }), { accept: null }] }, { expr: [dport('tcp', '@ports'), { accept: null }] }],
    },
  ]);
  const r = reachOfRuleset(rs(fw), [socket(80), socket(1500), socket(2001), socket(7000)]);
  t.same(
    r.map((x) => x.now),
    ['open', 'open', 'closed', 'closed'],
  );
});

t.test('rules on established connections, loopback or other protocols open nothing new', async (t) => {
  const fw = table('inet', 'filter', [
    {
      name: 'input',
      hook: 'input',
      policy: 'drop',
      rules: [
        { expr: established },
        { expr: invalidDrop },
        { expr: lo },
        { expr: [{ match: { op: '==', left: { meta: { key: 'l4proto' } }, right: { set: ['icmp', 'ipv6-icmp'] } } }, { accept: null }] },
        { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'new' } }, dport('udp', 53), { accept: null }] },
      ],
    },
  ]);
  const [tcp53, udp53] = reachOfRuleset(rs(fw), [socket(53), socket(53, 'udp')]);
  t.match(tcp53, { now: 'closed' });
  t.match(udp53, { now: 'open', mentioned: true }, '`ct state new` matches a new connection');
});

t.test('a drop rule closes only its port in a chain whose policy accepts; a jump to a dropping chain counts', async (t) => {
  const fw = table('inet', 'filter', [
    { name: 'x', rules: [{ expr: [dport('tcp', 9100), { drop: null }] }, { expr: [{ return: null }] }] },
    { name: 'input', hook: 'input', policy: 'accept', rules: [{ expr: [dport('tcp', 9000), { reject: null }] }, { expr: [{ jump: { target: 'x' } }] }] },
  ]);
  const r = reachOfRuleset(rs(fw), [socket(9000), socket(9100), socket(9200)]);
  t.same(
    r.map((x) => [x.now, x.mentioned]),
    [
      ['closed', true],
      ['closed', true],
      ['open', false],
    ],
  );
});

t.test('a packet must pass every base chain on the hook: the sources are intersected', async (t) => {
  const a = table('inet', 'a', [
    { name: 'input', hook: 'input', policy: 'drop', rules: [{ expr: [saddr('ip', prefix('10.0.0.0', 8)), dport('tcp', 5000), { accept: null }] }] },
  ]);
  const b = table('ip', 'b', [
    { name: 'input', hook: 'input', policy: 'drop', rules: [{ expr: [saddr('ip', prefix('10.1.0.0', 16)), dport('tcp', 5000), { accept: null }] }] },
  ]);
  t.match(reachOfRuleset(rs(a, b), [socket(5000)])[0], { now: 'open-from', from: ['10.1.0.0/16'] });
  t.match(reachOfRuleset(rs(b), [socket(5001)])[0], { now: 'open-from', from: ['::/0'] }, 'an ip table leaves IPv6 alone');
});

t.test("forwarded: a rule sees the container's port after DNAT, ct original proto-dst the published one", async (t) => {
  const fw = table('inet', 'filter', [
    {
      name: 'forward',
      hook: 'forward',
      policy: 'drop',
      rules: [
        { expr: [dport('tcp', 80), { accept: null }] },
        {
          expr: [
            { match: { op: '==', left: { meta: { key: 'l4proto' } }, right: 'tcp' } },
            { match: { op: '==', left: { ct: { key: 'proto-dst', dir: 'original' } }, right: 18082 } },
            { accept: null },
          ],
        },
      ],
    },
  ]);
  const r = reachOfRuleset(rs(fw), [published(18081, 80), published(18082, 81), published(18083, 81)]);
  t.same(
    r.map((x) => [x.now, x.mentioned]),
    [
      ['open', true],
      ['open', true],
      ['closed', false],
    ],
  );
  const dnat = table('inet', 'filter', [
    {
      name: 'forward',
      hook: 'forward',
      policy: 'drop',
      rules: [{ expr: [{ match: { op: 'in', left: { ct: { key: 'status' } }, right: 'dnat' } }, { accept: null }] }],
    },
  ]);
  t.match(reachOfRuleset(rs(dnat), [published(18081, 80)])[0], { now: 'open', mentioned: false }, '`ct status dnat accept` forwards every published port');
  t.match(
    reachOfRuleset(
      rs(
        table('inet', 'filter', [
          {
            name: 'input',
            hook: 'input',
            policy: 'drop',
            rules: [{ expr: [{ match: { op: 'in', left: { ct: { key: 'status' } }, right: 'dnat' } }, { accept: null }] }],
          },
        ]),
      ),
      [socket(22)],
    )[0],
    { now: 'closed' },
    '... and no socket',
  );
});

t.test("the mesh's own refusals count for reach but not as a found rule mentioning the port", async (t) => {
  const meshp = table('inet', 'meshp', [
    {
      name: 'forward',
      hook: 'forward',
      policy: 'accept',
      rules: [
        {
          comment: 'meshp:store/forwarded/tcp/15001',
          expr: [
            saddr('ip', prefix('10.77.0.0', 24), '!='),
            { match: { op: '==', left: { meta: { key: 'l4proto' } }, right: 'tcp' } },
            { match: { op: '==', left: { ct: { key: 'proto-dst', dir: 'original' } }, right: 15001 } },
            { drop: null },
          ],
        },
        {
          comment: 'meshp:store/forwarded/tcp/15001',
          expr: [
            { match: { op: '==', left: { meta: { key: 'nfproto' } }, right: 'ipv6' } },
            { match: { op: '==', left: { meta: { key: 'l4proto' } }, right: 'tcp' } },
            { match: { op: '==', left: { ct: { key: 'proto-dst', dir: 'original' } }, right: 15001 } },
            { drop: null },
          ],
        },
      ],
    },
  ]);
  t.same(reachOfRuleset(rs(found, meshp), [published(15001, 5000)])[0], {
    port: 15001,
    protocol: 'tcp',
    path: 'forwarded',
    now: 'open-from',
    from: ['10.77.0.0/24'],
    mentioned: false,
  });
});

t.test("Docker's tables and iptables-nft's are Docker's NAT doing its job: a published port is forwarded", async (t) => {
  const iptNft = table('ip', 'filter', [
    {
      name: 'DOCKER',
      rules: [
        {
          expr: [
            { match: { op: '!=', left: { meta: { key: 'iifname' } }, right: 'docker0' } },
            { match: { op: '==', left: { meta: { key: 'oifname' } }, right: 'docker0' } },
            dport('tcp', 80),
            { xt: { type: 'match', name: 'conntrack' } },
            { accept: null },
          ],
        },
      ],
    },
    { name: 'FORWARD', hook: 'forward', policy: 'drop', rules: [{ expr: [{ jump: { target: 'DOCKER' } }] }] },
  ]);
  t.match(reachOfRuleset(rs(found, iptNft), [published(18081, 80)])[0], { now: 'open', mentioned: false });
  const foundForward = table('inet', 'fw', [{ name: 'forward', hook: 'forward', policy: 'drop', rules: [] }]);
  t.match(reachOfRuleset(rs(foundForward, iptNft), [published(18081, 80)])[0], { now: 'closed' }, 'unless a found rule drops it');
});

t.test('one answer per door, in the order asked', async (t) => {
  const doors = [socket(9000), published(18081, 80), socket(8080)];
  t.same(
    reachOfRuleset(rs(found), doors).map((r) => `${r.path}/${r.port}`),
    ['incoming/9000', 'forwarded/18081', 'incoming/8080'],
  );
});

t.test("a named set's elements with a timeout (CrowdSec's, fail2ban's bans) are read as bans until they expire", async (t) => {
  const bans = table('ip', 'crowdsec', [
    { name: 'crowdsec-chain-input', hook: 'input', rules: [{ expr: [saddr('ip', '@crowdsec-blacklists'), { counter: null }, { drop: null }] }] },
  ]);
  // As `nft -j list ruleset` prints `elements = { 10.80.3.66 timeout 4h, 192.0.2.0/24 timeout 1m comment "x" }`.
  const set = {
    set: {
      family: 'ip',
      table: 'crowdsec',
      name: 'crowdsec-blacklists',
      type: 'ipv4_addr',
      flags: ['timeout', 'interval'],
      elem: [
        { elem: { val: '10.80.3.66', timeout: 14400, expires: 14399 } },
        { elem: { val: prefix('192.0.2.0', 24), timeout: 60, expires: 59, comment: 'x' } },
      ],
    },
  };
  const ssh = table('inet', 'filter', [{ name: 'input', hook: 'input', policy: 'drop', rules: [{ expr: [dport('tcp', 22), { accept: null }] }] }]);
  const [r] = reachOfRuleset(rs(bans, [set], ssh), [socket(22)], true);
  t.equal(r!.now, 'open-from');
  t.same(r!.unread, [], 'nothing unread: the set is read');
  t.same(r!.droppedBy?.[0]?.from, ['10.80.3.66/32', '192.0.2.0/24'], 'its elements are the bans');
  t.notOk(
    r!.from?.some((c) => c.startsWith('10.80.3.66')),
    'the banned address is not among the sources that reach it',
  );
});
