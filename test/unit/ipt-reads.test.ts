/** Matches the iptables reader reads since issue 32: TCP flags against a SYN, fragments, interfaces by their routes (wildcards too). */
import t from 'tap';
import { parseSave, reachOfFilters, type SavedTable } from '@meshp/firewall-iptables';
import { arrivalsOf } from '@meshp/core/net';
import type { Door } from '@meshp/core';

const filter = (lines: string[], policy = 'ACCEPT'): SavedTable =>
  parseSave(`*filter\n:INPUT ${policy} [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n${lines.join('\n')}\nCOMMIT\n`).tables[0]!;
const door: Door = { port: 7443, protocol: 'tcp', path: 'incoming' };

t.test('scan and fragment drops match no new connection: the port stays open, nothing unread', async (t) => {
  const f = filter([
    '-A INPUT -p tcp -m tcp ! --tcp-flags FIN,SYN,RST,ACK SYN -m conntrack --ctstate NEW -j DROP',
    '-A INPUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,PSH,ACK,URG NONE -j DROP',
    '-A INPUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,PSH,ACK,URG FIN,SYN,RST,PSH,ACK,URG -j DROP',
    '-A INPUT -p tcp -m tcp --tcp-flags SYN,RST SYN,RST -j DROP',
    '-A INPUT -f -j DROP',
    '-A INPUT -p tcp -m tcp --dport 7443 -j ACCEPT',
    '-A INPUT -j DROP',
  ]);
  const [r] = reachOfFilters({ 4: f, 6: undefined }, [door], true);
  t.equal(r?.now, 'open');
  t.same(r?.unread, [], 'every match read');
});

t.test('a SYN check (FIN,SYN,RST,ACK SYN) matches the door; a mask with ECE decides nothing when ECN may be asked', async (t) => {
  const syn = filter(['-A INPUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j DROP']);
  t.equal(reachOfFilters({ 4: syn, 6: undefined }, [door])[0]?.now, 'open-from', 'the SYN check drops the door (IPv4 closed, IPv6 untouched)');
  const ecn = filter(['-A INPUT -p tcp -m tcp --tcp-flags SYN,ECE SYN -j DROP']);
  const [r] = reachOfFilters({ 4: ecn, 6: undefined }, [door], true);
  t.equal(r?.now, 'open', 'unread: taken as matching nothing');
  t.equal(r?.unread?.length, 1, 'and named as unread');
});

t.test('-i read by the routes back: a wildcard covers every interface it names', async (t) => {
  const arrivals = arrivalsOf([
    { family: 4, dst: 'default', dev: 'eth0' },
    { family: 4, dst: '10.1.0.0/16', dev: 'cali1a2b' },
    { family: 4, dst: '10.2.0.0/16', dev: 'cali3c4d' },
  ]);
  const f = { ...filter(['-A INPUT -i cali+ -j DROP']), arrivals };
  const [r] = reachOfFilters({ 4: f, 6: undefined }, [door]);
  t.equal(r?.now, 'open-from');
  t.notOk(
    r?.from?.some((c) => c.startsWith('10.1.') || c.startsWith('10.2.')),
    `the pods' ranges are dropped: ${r?.from?.join(' ')}`,
  );
  t.ok(r?.from?.includes('10.0.0.0/16'), 'what arrives on eth0 is not');
  const none = { ...filter(['-A INPUT -i wan9 -j DROP']), arrivals };
  t.equal(reachOfFilters({ 4: none, 6: undefined }, [door])[0]?.now, 'open', 'an interface no route leaves by is unread (matches nothing)');
});
