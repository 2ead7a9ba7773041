import t from 'tap';
import { addressText, addressToBigInt, parseRange, toCidrs, spansToSet } from '@meshp/core/net';

t.test('ranges read back in the canonical form firewalls print', async (t) => {
  t.equal(parseRange('10.1.2.3/24').text, '10.1.2.0/24', 'host bits masked off');
  t.equal(parseRange('10.1.2.3').text, '10.1.2.3/32', 'a bare address is a /32');
  t.equal(parseRange('FD00:0:0:1::5/64').text, 'fd00:0:0:1::/64');
  t.equal(parseRange('2001:db8:0:0:1:0:0:1').text, '2001:db8::1:0:0:1/128', 'RFC 5952: the first longest zero run');
  t.equal(addressText(addressToBigInt('::ffff:10.0.0.1'), 6), '::ffff:a00:1', 'IPv4-mapped IPv6 parsed');
  t.equal(parseRange('0.0.0.0/0').last, (1n << 32n) - 1n);
});

t.test('a range that is not one is refused with the code the caller names', async (t) => {
  t.throws(() => parseRange('10.0.0.0/33'), { code: 'MESHP_DECLARATION_INVALID' });
  t.throws(() => parseRange('10.0.0.0/8x'), { code: 'MESHP_DECLARATION_INVALID' });
  t.throws(() => parseRange('nope', 'MESHP_FIREWALL_FAILED'), { code: 'MESHP_FIREWALL_FAILED' });
});

t.test('sets of ranges reduce to the fewest CIDRs', async (t) => {
  const r = (c: string) => {
    const x = parseRange(c);
    return { family: x.family, first: x.first, last: x.last };
  };
  t.same(toCidrs(spansToSet([r('10.0.0.0/25'), r('10.0.0.128/25'), r('fd00::/9'), r('fd80::/9')])), ['10.0.0.0/24', 'fd00::/8']);
});
