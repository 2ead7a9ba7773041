/** core's placement rule on reach chains as the plugins read them: partial denials above, the total one below. */
import t from 'tap';
import { deniesInvalid, invalidDropAbove, placeOpening, portClasses, spansToSet, cidrSpan, type ReachChain, type ReachRule } from '@meshp/core/net';

const door = { port: 7443, protocol: 'tcp' as const, path: 'incoming' as const };
const range = spansToSet([cidrSpan('10.80.0.0/16')]);
const src = (c: string) => ({ spans: [cidrSpan(c)], negate: false });
const chain = (rules: ReachRule[], regular: Record<string, ReachRule[]> = {}, policy: 'accept' | 'drop' = 'drop'): ReachChain => ({
  policy,
  families: [4],
  rules,
  regular: new Map(Object.entries(regular)),
  label: 'INPUT',
});
const r = (x: Partial<ReachRule> & Pick<ReachRule, 'verdict'>): ReachRule => ({ found: true, ...x });

t.test('after a ban inside the range and ct state invalid, before the bare reject', async (t) => {
  const c = chain([
    r({ verdict: 'drop', notNew: true }),
    r({ verdict: 'drop', sources: src('10.80.3.66/32') }),
    r({ verdict: 'accept', dport: { ranges: [[22, 22]], negate: false } }),
    r({ verdict: 'drop' }),
  ]);
  t.same(placeOpening(c, door, range), { kind: 'before', index: 3, after: 1 });
});

t.test('a ban outside the range and a drop of another port are not partial denials of this traffic', async (t) => {
  const c = chain([r({ verdict: 'drop', sources: src('192.0.2.0/24') }), r({ verdict: 'drop', dport: { ranges: [[23, 23]], negate: false } })]);
  t.same(placeOpening(c, door, range), { kind: 'end', after: -1 });
});

t.test('a jump to a chain that rejects some and returns is partial; to one ending in a reject, total', async (t) => {
  const f2b = [r({ verdict: 'drop', sources: src('10.80.3.66/32') }), r({ verdict: 'return' })];
  t.same(placeOpening(chain([r({ verdict: 'jump', target: 'f2b' })], { f2b }), door, range), { kind: 'end', after: 0 });
  const logdrop = [r({ verdict: 'none', opaque: true }), r({ verdict: 'drop' })];
  t.same(placeOpening(chain([r({ verdict: 'jump', target: 'logdrop' })], { logdrop }), door, range), { kind: 'before', index: 0, after: -1 });
});

t.test('a jumped-to chain with a ban and then a reject leaves no place; a goto whose rest meets the policy neither', async (t) => {
  const zone = [r({ verdict: 'drop', sources: src('10.80.3.66/32'), label: 'ban' }), r({ verdict: 'drop', label: 'reject' })];
  const p = placeOpening(chain([r({ verdict: 'jump', target: 'zone', label: 'jump zone' })], { zone }), door, range);
  t.match(p, { kind: 'refused', rule: 'jump zone', why: /ban.*reject/ });
  const partialGoto = placeOpening(
    chain([r({ verdict: 'goto', target: 'f2b', label: 'goto f2b' })], { f2b: [r({ verdict: 'drop', sources: src('10.80.3.66/32') })] }),
    door,
    range,
  );
  t.match(partialGoto, { kind: 'refused', rule: 'goto f2b' });
});

t.test('an unreadable drop is taken as partial; a policy that accepts with no total drop needs nothing', async (t) => {
  t.same(placeOpening(chain([r({ verdict: 'drop', opaque: true })]), door, range), { kind: 'end', after: 0 });
  t.same(placeOpening(chain([r({ verdict: 'drop', sources: src('10.80.3.66/32') })], {}, 'accept'), door, range), { kind: 'none' });
  t.same(placeOpening(chain([r({ verdict: 'drop', loopback: true })], {}, 'accept'), door, range), { kind: 'none' }, 'a rule on lo never sees the range');
});

t.test("a chain that keeps invalid packets out: the opening's accept must too (Debian's workstation.nft, an explicit invalid drop)", async (t) => {
  const ssh = { ranges: [[22, 22]] as [number, number][], negate: false };
  // `ct state established,related accept; tcp dport 22 ct state new accept; drop`: a bare ACK to 22 meets the drop.
  const debian = chain([
    r({ verdict: 'accept', notNew: true, invalid: 'skips' }),
    r({ verdict: 'accept', dport: ssh, invalid: 'skips' }),
    r({ verdict: 'drop' }),
  ]);
  t.same(placeOpening(debian, door, range), { kind: 'before', index: 2, after: -1, invalid: true });
  // Without a state match on its accept, the found chain answers a bare ACK on 22: nothing to keep.
  const plain = chain([r({ verdict: 'accept', notNew: true, invalid: 'skips' }), r({ verdict: 'accept', dport: ssh }), r({ verdict: 'drop' })]);
  t.same(placeOpening(plain, door, range), { kind: 'before', index: 2, after: -1 });
  t.notOk(deniesInvalid(plain), 'an established accept alone says nothing of invalid packets');
  // `ct state invalid drop` in a jumped-to chain (puppet-nftables' `global`), and a vmap's `invalid : drop` (NixOS).
  const global = [r({ verdict: 'drop', notNew: true, invalid: 'matches' })];
  t.ok(deniesInvalid(chain([r({ verdict: 'jump', target: 'global' }), r({ verdict: 'drop' })], { global })));
  t.ok(deniesInvalid(chain([r({ verdict: 'jump', target: 'allow', partial: true, invalid: 'matches' })], { allow: [] })));
  t.notOk(deniesInvalid(chain([r({ verdict: 'drop', notNew: true, invalid: 'matches', loopback: true })])), 'a rule on lo only is not about the range');
});

t.test('below a drop of every invalid packet in the base chain, the accept needs no state match of its own', async (t) => {
  const invalidDrop = r({ verdict: 'drop', notNew: true, invalid: 'matches', label: 'ct state invalid drop' });
  const established = r({ verdict: 'accept', notNew: true, invalid: 'skips' });
  // The usual stateful chain (the bench's, Debian's default with an invalid drop): the accept goes below it, plain.
  const usual = chain([established, invalidDrop, r({ verdict: 'accept', loopback: true }), r({ verdict: 'drop' })]);
  t.ok(deniesInvalid(usual));
  t.equal(invalidDropAbove(usual, 3, door), 1);
  t.same(placeOpening(usual, door, range), { kind: 'before', index: 3, after: 1 }, 'below the invalid drop, no ct state match');
  // Only the policy drops: the same, at the end.
  t.same(placeOpening(chain([established, invalidDrop]), door, range), { kind: 'end', after: 1 });
  // A ct state vmap with invalid : drop (NixOS) counts as well.
  const vmap = r({ verdict: 'accept', notNew: true, partial: true, invalid: 'matches' });
  t.same(placeOpening(chain([vmap, r({ verdict: 'drop' })]), door, range), { kind: 'before', index: 1, after: 0 });
  // Narrowed to part of the traffic, it leaves some invalid packets walking: the accept keeps them out itself.
  const narrowed: Partial<ReachRule>[] = [
    { sources: src('10.80.0.0/24') },
    { arrives: spansToSet([cidrSpan('10.80.0.0/16')]) },
    { dport: { ranges: [[7443, 7443]], negate: false } },
    { protocols: ['udp'] },
    { families: [6] },
    { paths: ['forwarded'] },
  ];
  for (const n of narrowed) {
    const c = chain([established, r({ verdict: 'drop', notNew: true, invalid: 'matches', ...n }), r({ verdict: 'drop' })]);
    t.equal(invalidDropAbove(c, 2, door), -1, `not every invalid packet: ${JSON.stringify(Object.keys(n))}`);
    if (deniesInvalid(c)) t.match(placeOpening(c, door, range), { kind: 'before', index: 2, invalid: true });
  }
  // Below the total drop, or only in a jumped-to chain, it is not above the place: the match stays.
  const below = chain([established, r({ verdict: 'drop' }), invalidDrop]);
  t.same(placeOpening(below, door, range), { kind: 'before', index: 1, after: -1, invalid: true }, 'an invalid drop below the total one is never met first');
  const jumped = chain([r({ verdict: 'jump', target: 'global' }), r({ verdict: 'drop' })], { global: [invalidDrop] });
  t.match(placeOpening(jumped, door, range), { kind: 'before', index: 1, invalid: true }, 'one in a jumped-to chain: the base chain drops none itself');
  // Debian's workstation.nft (accepts of new connections only, no invalid drop): unchanged, the match stays.
  const debian = chain([established, r({ verdict: 'accept', dport: { ranges: [[22, 22]], negate: false }, invalid: 'skips' }), r({ verdict: 'drop' })]);
  t.equal(invalidDropAbove(debian, 2, door), -1);
  t.match(placeOpening(debian, door, range), { invalid: true });
});

t.test('ports of one class are placed alike; the classes part where a rule’s range begins or ends', async (t) => {
  const ports = (ranges: [number, number][], negate = false) => ({ ranges, negate });
  // Ranges on both paths' fields, a negation, a jump target's own range, overlapping bounds.
  const c = chain(
    [
      r({ verdict: 'drop', notNew: true }),
      r({ verdict: 'drop', sources: src('10.80.3.0/24'), dport: ports([[1000, 1999]]) }),
      r({ verdict: 'accept', dport: ports([[22, 22]]) }),
      r({ verdict: 'jump', target: 'svc', dport: ports([[1500, 2500]], true) }),
      r({ verdict: 'drop', origDport: ports([[8000, 8080]]) }),
      r({ verdict: 'drop', dport: ports([[3000, 3000]]) }),
    ],
    { svc: [r({ verdict: 'drop', sources: src('10.80.9.0/24'), dport: ports([[443, 443]]) }), r({ verdict: 'return' })] },
  );
  const classOf = portClasses(c);
  const place = (port: number) => placeOpening(c, { ...door, port }, range);
  const edges = [1, 21, 22, 23, 442, 443, 444, 999, 1000, 1001, 1499, 1500, 1999, 2000, 2500, 2501, 2999, 3000, 3001, 7999, 8000, 8080, 8081, 65535];
  const byClass = new Map<number, { port: number; p: ReturnType<typeof place> }>();
  let classes = 0;
  let checked = 0;
  for (const port of [...edges, ...Array.from({ length: 400 }, (_, i) => 1 + ((i * 7919) % 65535))]) {
    const k = classOf(port);
    const first = byClass.get(k);
    if (!first) {
      byClass.set(k, { port, p: place(port) });
      classes++;
    } else {
      t.same(place(port), first.p, `port ${port} is placed as port ${first.port} of its class`);
      checked++;
    }
  }
  t.ok(checked > 300, `${checked} ports checked against the first of their class`);
  t.equal(classes, 13, 'twelve bounds (each range’s first port and the one past its last), thirteen classes, each met');
  t.not(classOf(22), classOf(23), 'a one-port range is a class of its own');
  t.not(classOf(2999), classOf(3000));
  t.equal(classOf(20000), classOf(65535), 'past every range, one class');
  t.not(place(3000), place(3001), 'and the classes matter: a drop of port 3000 places its opening elsewhere than 3001’s');
});
