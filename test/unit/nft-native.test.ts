import t from 'tap';
import type { Opening } from '@meshp/core';
import {
  additionCommand,
  buildRule,
  nativeBatch,
  nativePlan,
  receiptLines,
  shapesFor,
  type Addition,
  type Command,
  type NftRule,
} from '@meshp/firewall-nftables';

const web: Opening = {
  id: 'web/incoming/tcp/9000',
  module: 'web',
  port: 9000,
  protocol: 'tcp',
  from: ['10.8.0.0/16', '10.9.0.0/24', 'fd00::/8'],
  path: 'incoming',
  action: 'accept',
};
const at = { family: 'inet', table: 'filter', chain: 'input' } as const;
const insert = (o: Opening, handle = 13): Command[] => shapesFor(o, 'inet').map((s) => ({ insert: { rule: { ...buildRule(s, at), handle } } }));

t.test('the rules ensure writes render in nft syntax, one line per command', async (t) => {
  t.equal(
    nativeBatch(insert(web)),
    'insert rule inet filter input handle 13 ip saddr { 10.8.0.0/16, 10.9.0.0/24 } tcp dport 9000 accept comment "meshp:web/incoming/tcp/9000"\n' +
      'insert rule inet filter input handle 13 ip6 saddr fd00::/8 tcp dport 9000 accept comment "meshp:web/incoming/tcp/9000"\n',
  );
  const fwd: Opening = { ...web, id: 'f', path: 'forwarded', protocol: 'udp', from: ['10.8.0.1'] };
  t.equal(
    nativeBatch(shapesFor(fwd, 'ip').map((s) => ({ add: { rule: buildRule(s, { family: 'ip', table: 'fw', chain: 'FORWARD' }) } }))),
    'add rule ip fw FORWARD ct original ip saddr 10.8.0.1 meta l4proto udp ct original proto-dst 9000 accept comment "meshp:f"\n',
  );
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [] };
  const lines = nativeBatch([
    { add: { table: { family: 'inet', name: 'meshp' } } },
    { add: { chain: { family: 'inet', table: 'meshp', name: 'forward', type: 'filter', hook: 'forward', prio: 0, policy: 'accept' } } },
    ...shapesFor(refusal, 'inet', '10.70.0.0/16').map((s) => ({ add: { rule: buildRule(s, { family: 'inet', table: 'meshp', chain: 'forward' }) } })),
    { delete: { rule: { family: 'inet', table: 'filter', chain: 'input', handle: 4, expr: [] } } },
    { delete: { chain: { family: 'inet', table: 'meshp', name: 'input' } } },
  ])!.split('\n');
  t.same(lines, [
    'add table inet meshp',
    'add chain inet meshp forward { type filter hook forward priority 0; policy accept; }',
    'add rule inet meshp forward ct original ip saddr != 10.70.0.0/16 meta l4proto tcp ct original proto-dst 9000 drop comment "meshp:r"',
    'add rule inet meshp forward meta nfproto ipv6 meta l4proto tcp ct original proto-dst 9000 drop comment "meshp:r"',
    'delete rule inet filter input handle 4',
    'delete chain inet meshp input',
    '',
  ]);
  t.equal(nativeBatch(insert({ ...web, from: [] })), 'insert rule inet filter input handle 13 tcp dport 9000 accept comment "meshp:web/incoming/tcp/9000"\n');
});

t.test('names nft syntax cannot carry, and statements not ours, send the batch as JSON (null)', async (t) => {
  const rule = buildRule(shapesFor({ ...web, from: [] }, 'inet')[0]!, at);
  for (const [what, r] of [
    ['a chain named like a keyword', { ...rule, chain: 'counter' }],
    ['a table name with a space', { ...rule, table: 'my filter' }],
    ['a chain name with a quote', { ...rule, chain: 'in"put' }],
    ['a non-ASCII comment', { ...rule, comment: 'meshp:wéb' }],
    ['an unknown statement', { ...rule, expr: [{ log: { prefix: 'x' } }, { accept: null }] }],
    ['a bridge table', { ...rule, family: 'bridge' as const }],
  ] as const) {
    t.equal(nativeBatch([{ add: { rule: r } }]), null, what);
  }
  t.equal(nativeBatch([{ flush: { ruleset: {} } }]), null, 'a command ensure never writes');
});

t.test("a batch's receipt: the mesh table's receipt set emptied and given the one nonce", async (t) => {
  t.same(receiptLines(439041101).split('\n'), [
    'add table inet meshp',
    'add set inet meshp receipt { type mark; comment "meshp:receipt: the last batch this host committed"; }',
    'flush set inet meshp receipt',
    'add element inet meshp receipt { 439041101 }',
    '',
  ]);
  for (const bad of [0, -1, 0x100000000, 1.5, NaN]) t.throws(() => receiptLines(bad), RangeError, `${bad} is not a 32-bit mark`);
});

t.test('a rule placed after the rule before the drop is written add … handle, last and in reverse, so the chain ends in plan order', async (t) => {
  const before = { family: 'inet', table: 'filter', chain: 'input', handle: 13, expr: [] } as NftRule;
  const input = { family: 'inet', table: 'filter', name: 'input' } as const;
  const after = { ...before, handle: 12 };
  const additions: Addition[] = [
    ...['a', 'b', 'c'].map((id) => ({ shape: shapesFor({ ...web, id, from: [] }, 'inet')[0]!, chain: input, before, after })),
    { shape: shapesFor({ ...web, id: 'm', from: [] }, 'inet')[0]!, chain: { ...input, table: 'meshp' }, before: null },
  ];
  t.same(nativePlan({ head: [], additions })!.split('\n'), [
    'add rule inet meshp input tcp dport 9000 accept comment "meshp:m"',
    'add rule inet filter input handle 12 tcp dport 9000 accept comment "meshp:c"',
    'add rule inet filter input handle 12 tcp dport 9000 accept comment "meshp:b"',
    'add rule inet filter input handle 12 tcp dport 9000 accept comment "meshp:a"',
    '',
  ]);
  t.ok(
    additions.slice(0, 3).every((a) => 'insert' in additionCommand(a)),
    "the JSON batch inserts before the drop: nft 1.0.6 ignores a JSON add's handle",
  );
});

t.test('a plan rendered from its shapes is the same script as its JSON commands rendered', async (t) => {
  const before = { family: 'inet', table: 'filter', chain: 'input', handle: 13, expr: [] } as NftRule;
  const input = { family: 'inet', table: 'filter', name: 'input' } as const;
  const fwd = { family: 'ip6', table: 'f6', name: 'forward' } as const;
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [] };
  const additions: Addition[] = [
    ...shapesFor(web, 'inet').map((shape) => ({ shape, chain: input, before })),
    ...shapesFor({ ...web, id: 'valid' }, 'inet').map((shape) => ({ shape: { ...shape, valid: true }, chain: input, before })),
    ...shapesFor({ ...web, from: [] }, 'inet').map((shape) => ({ shape, chain: input, before: null })),
    ...shapesFor({ ...web, id: 'one', from: ['10.8.0.1', 'fd00::1'] }, 'inet').map((shape) => ({ shape, chain: input, before })),
    ...shapesFor({ ...web, path: 'forwarded', protocol: 'udp' }, 'ip6').map((shape) => ({ shape, chain: fwd, before: null })),
    ...shapesFor(refusal, 'inet', '10.70.0.0/16').map((shape) => ({ shape, chain: { ...input, table: 'meshp' }, before: null })),
  ];
  const head: Command[] = [{ delete: { rule: { family: 'inet', table: 'filter', chain: 'input', handle: 4, expr: [] } } }];
  t.equal(nativePlan({ head, additions }), nativeBatch([...head, ...additions.map(additionCommand)]));
  t.equal(nativePlan({ head: [{ flush: { ruleset: {} } }], additions }), null, 'a head command nft syntax is not used for: JSON');
  t.equal(nativePlan({ head: [], additions: [{ ...additions[0]!, chain: { ...input, name: 'counter' } }] }), null, 'a keyword chain name: JSON');
});
