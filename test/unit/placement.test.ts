/** core's placement rule on reach chains as the plugins read them: partial denials above, the total one below. */
import t from 'tap';
import { deniesInvalid, placeOpening, spansToSet, cidrSpan, type ReachChain, type ReachRule } from '@meshp/core/net';

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
