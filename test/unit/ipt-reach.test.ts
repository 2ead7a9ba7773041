/** Reachability through the iptables filter tables as iptables-save prints them. */
import t from 'tap';
import { buildArgs, formatArgs, parseSave, reachOfFilters, type SavedTable } from '@meshp/firewall-iptables';
import type { Door } from '@meshp/core';

const filter = (lines: string[], chains = ':INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]'): SavedTable =>
  parseSave(`*filter\n${chains}\n${lines.join('\n')}\nCOMMIT\n`).tables[0]!;
const socket = (port: number, protocol: 'tcp' | 'udp' = 'tcp'): Door => ({ port, protocol, path: 'incoming' });
const published = (port: number, targetPort: number): Door => ({ port, protocol: 'tcp', path: 'forwarded', targetPort });

const FOUND = [
  '-A INPUT -i lo -j ACCEPT',
  '-A INPUT -m conntrack --ctstate INVALID -j DROP',
  '-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A INPUT -p tcp -m tcp --dport 8080 -j ACCEPT',
  '-A INPUT -s 10.77.0.0/24 -p tcp -m multiport --dports 22,9000:9010 -j ACCEPT',
  '-A INPUT -p udp -m conntrack --ctstate NEW -m udp --dport 53 -j ACCEPT',
  '-A INPUT -j REJECT --reject-with icmp-port-unreachable',
];

const FOUND6 = FOUND.map((l) => l.replace('10.77.0.0/24', 'fd77::/64'));

// Docker's filter table (iptables 1.8, Docker 20.10) around a found firewall.
const DOCKER_CHAINS =
  ':INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:DOCKER - [0:0]\n:DOCKER-ISOLATION-STAGE-1 - [0:0]\n:DOCKER-ISOLATION-STAGE-2 - [0:0]\n:DOCKER-USER - [0:0]';
const DOCKER = [
  '-A FORWARD -j DOCKER-USER',
  '-A FORWARD -j DOCKER-ISOLATION-STAGE-1',
  '-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A FORWARD -o docker0 -j DOCKER',
  '-A FORWARD -i docker0 ! -o docker0 -j ACCEPT',
  '-A FORWARD -i docker0 -o docker0 -j ACCEPT',
  '-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 80 -j ACCEPT',
  '-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2',
  '-A DOCKER-ISOLATION-STAGE-1 -j RETURN',
  '-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP',
  '-A DOCKER-ISOLATION-STAGE-2 -j RETURN',
];

t.test('INPUT: an accepted port is open and mentioned; one the found firewall rejects is closed and unmentioned', async (t) => {
  const [web, other] = reachOfFilters({ 4: filter(FOUND), 6: filter(FOUND6) }, [socket(8080), socket(9999)]);
  t.same(web, { port: 8080, protocol: 'tcp', path: 'incoming', now: 'open', mentioned: true });
  t.same(other, { port: 9999, protocol: 'tcp', path: 'incoming', now: 'closed', mentioned: false });
  t.match(
    reachOfFilters({ 4: filter(FOUND), 6: undefined }, [socket(9999)])[0],
    { now: 'open-from', from: ['::/0'] },
    'an IPv4 firewall alone leaves IPv6 open',
  );
});

t.test('sources, multiport lists and ranges, protocols and conntrack states are read', async (t) => {
  const v6 = filter(['-A INPUT -s fd00::/8 -p tcp -m tcp --dport 22 -j ACCEPT']);
  const r = reachOfFilters({ 4: filter(FOUND), 6: v6 }, [socket(22), socket(9005), socket(53, 'udp'), socket(53), socket(8080)]);
  t.same(r[0], { port: 22, protocol: 'tcp', path: 'incoming', now: 'open-from', from: ['10.77.0.0/24', 'fd00::/8'], mentioned: true });
  t.match(r[1], { now: 'open-from', from: ['10.77.0.0/24'] }, 'a multiport range; ip6tables drops it');
  t.match(r[2], { now: 'open-from', from: ['0.0.0.0/0'] }, 'NEW udp 53 is accepted over IPv4');
  t.match(r[3], { now: 'closed' }, 'tcp 53 is not');
  t.match(r[4], { now: 'open-from', from: ['0.0.0.0/0'] });
});

t.test('a drop before the accept wins; a jump to a user chain that drops counts; ! -s keeps the rest', async (t) => {
  const f = filter(
    [
      '-A INPUT -j LOCKDOWN',
      '-A INPUT -p tcp -m tcp --dport 7000 -j DROP',
      '-A INPUT -p tcp -m tcp --dport 7000 -j ACCEPT',
      '-A LOCKDOWN ! -s 10.0.0.0/8 -p tcp -m tcp --dport 7100 -j DROP',
      '-A LOCKDOWN -j RETURN',
    ],
    ':INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:LOCKDOWN - [0:0]',
  );
  const r = reachOfFilters({ 4: f, 6: f }, [socket(7000), socket(7100), socket(7200)]);
  t.same(
    r.map((x) => [x.now, x.from, x.mentioned]),
    [
      ['closed', undefined, true],
      ['open-from', ['10.0.0.0/8', '::/0'], true],
      ['open', undefined, false],
    ],
  );
});

t.test("with Docker present a published port is forwarded: Docker's chains and FORWARD policy are its NAT doing its job", async (t) => {
  const f = filter([...FOUND, ...DOCKER, '-A DOCKER-USER -j RETURN'], DOCKER_CHAINS);
  t.same(reachOfFilters({ 4: f, 6: undefined }, [published(18081, 80)])[0], { port: 18081, protocol: 'tcp', path: 'forwarded', now: 'open', mentioned: false });
});

t.test('unless a found rule in DOCKER-USER drops it (by its original port), or a marked refusal keeps it to the private range', async (t) => {
  const refusal = buildArgs({
    id: 'store/forwarded/tcp/15001',
    chain: 'DOCKER-USER',
    source: '10.77.0.0/24',
    negated: true,
    protocol: 'tcp',
    port: 15001,
    path: 'forwarded',
    action: 'drop',
  });
  // IPv6 has no private range: the refusal drops it from everywhere.
  const refusal6 = buildArgs({
    id: 'store/forwarded/tcp/15001',
    chain: 'DOCKER-USER',
    source: null,
    negated: false,
    protocol: 'tcp',
    port: 15001,
    path: 'forwarded',
    action: 'drop',
  });
  const table = (r: string[]) =>
    filter(
      [...DOCKER, `-A DOCKER-USER ${formatArgs(r)}`, '-A DOCKER-USER -p tcp -m conntrack --ctorigdstport 18082 -j DROP', '-A DOCKER-USER -j RETURN'],
      DOCKER_CHAINS,
    );
  const r = reachOfFilters({ 4: table(refusal), 6: table(refusal6) }, [published(18082, 80), published(15001, 5000), published(18081, 80)]);
  t.match(r[0], { now: 'closed', mentioned: true });
  t.same(
    r[1],
    { port: 15001, protocol: 'tcp', path: 'forwarded', now: 'open-from', from: ['10.77.0.0/24'], mentioned: false },
    "the mesh's own rule is not a found rule",
  );
  t.match(r[2], { now: 'open', mentioned: false });
});

t.test('without Docker, a FORWARD policy of DROP closes what no rule accepts', async (t) => {
  const f = filter(['-A FORWARD -p tcp -m tcp --dport 80 -j ACCEPT'], ':INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]');
  const r = reachOfFilters({ 4: f, 6: f }, [published(18081, 80), published(18083, 81)]);
  t.same(
    r.map((x) => [x.now, x.mentioned]),
    [
      ['open', true],
      ['closed', false],
    ],
    "FORWARD sees the container's port after DNAT",
  );
});

t.test('rules on an interface or a destination are opaque: they open and close nothing', async (t) => {
  const f = filter(
    ['-A INPUT -i eth1 -p tcp -m tcp --dport 6000 -j ACCEPT', '-A INPUT -d 10.0.0.1/32 -p tcp -m tcp --dport 6001 -j ACCEPT'],
    ':INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]',
  );
  const r = reachOfFilters({ 4: f, 6: f }, [socket(6000), socket(6001)]);
  t.same(
    r.map((x) => [x.now, x.mentioned]),
    [
      ['closed', true],
      ['closed', true],
    ],
  );
});

t.test('-m addrtype (ufw-not-local): a door is LOCAL on the incoming path, never BROADCAST or MULTICAST', async (t) => {
  // ufw's before-input chain, as `ufw enable` writes it (ufw 0.36 before.rules), around an accepted port.
  const chains = ':INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:ufw-not-local - [0:0]';
  const ufw = (port: number) =>
    filter(
      [
        '-A INPUT -j ufw-not-local',
        `-A INPUT -p tcp -m tcp --dport ${port} -j ACCEPT`,
        '-A ufw-not-local -m addrtype --dst-type LOCAL -j RETURN',
        '-A ufw-not-local -m addrtype --dst-type MULTICAST -j RETURN',
        '-A ufw-not-local -m addrtype --dst-type BROADCAST -j RETURN',
        '-A ufw-not-local -j DROP',
      ],
      chains,
    );
  t.match(
    reachOfFilters({ 4: ufw(8080), 6: filter([]) }, [socket(8080)])[0],
    { now: 'open-from', from: ['0.0.0.0/0'] },
    'the LOCAL return lets the door through to its accept',
  );
  t.match(reachOfFilters({ 4: ufw(8081), 6: filter([]) }, [socket(8080)])[0], { now: 'closed' }, 'and a port no rule accepts stays closed');
  const notLocal = filter(['-A INPUT -m addrtype ! --dst-type LOCAL -j DROP', '-A INPUT -p tcp -m tcp --dport 8080 -j ACCEPT']);
  t.match(
    reachOfFilters({ 4: notLocal, 6: filter([]) }, [socket(8080)])[0],
    { now: 'open-from', from: ['0.0.0.0/0'] },
    '! --dst-type LOCAL does not drop traffic to the host',
  );
  const fwd = filter(
    ['-A FORWARD -m addrtype --dst-type LOCAL -j DROP', '-A FORWARD -p tcp -m tcp --dport 80 -j ACCEPT'],
    ':INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]',
  );
  t.match(reachOfFilters({ 4: fwd, 6: filter([]) }, [published(8080, 80)])[0], { now: /^open/ }, 'a DNATed connection is not LOCAL on the forwarded path');
});
