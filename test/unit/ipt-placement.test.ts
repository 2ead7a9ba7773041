/** The placement rule on iptables shapes met in the wild: after every partial denial, before the first total one. */
import t from 'tap';
import type { Opening } from '@meshp/core';
import { desiredSpecs, parseSave, planEnsure, type SavedTable } from '@meshp/firewall-iptables';

const filter = (text: string): SavedTable => parseSave(`*filter\n${text}\nCOMMIT\n`).tables[0]!;
const web: Opening = { id: 'web/incoming/tcp/8443', module: 'web', port: 8443, protocol: 'tcp', from: ['10.60.0.0/16'], path: 'incoming', action: 'accept' };

function plan(f: SavedTable, o: Opening = web) {
  const unplaceable: { id: string; reason: string }[] = [];
  const specs = desiredSpecs(4, f, { openings: [o], refusals: [] }, unplaceable);
  return { edit: planEnsure(f, specs, 4), unplaceable };
}

t.test('fail2ban: the accept goes below the jump to f2b-recidive (a chain that rejects some sources and returns)', async (t) => {
  const f = filter(`:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:f2b-recidive - [0:0]
:f2b-sshd - [0:0]
-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd
-A INPUT -j f2b-recidive
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A f2b-recidive -s 203.0.113.9/32 -j REJECT --reject-with icmp-port-unreachable
-A f2b-recidive -j RETURN
-A f2b-sshd -j RETURN`);
  const { edit, unplaceable } = plan(f);
  t.same(unplaceable, []);
  t.same(
    edit.lines.map((l) => l.split(' ').slice(0, 2).join(' ')),
    ['-A INPUT'],
    'only the policy drops all: appended, below the ban',
  );
});

t.test("a blocklist and kube-proxy's KUBE-FIREWALL are passed; the accept lands just before the bare REJECT", async (t) => {
  const f = filter(`:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -s 198.51.100.0/24 -j DROP
-A INPUT -s 10.60.7.7/32 -j DROP
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -p tcp -m limit --limit 50/second -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -j REJECT
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FIREWALL -m mark --mark 0x8000/0x8000 -j DROP`);
  const { edit } = plan(f);
  t.equal(edit.lines.length, 1);
  t.match(edit.lines[0], /^-I INPUT 7 -s 10\.60\.0\.0\/16 /, 'after the two blocklist drops (one inside the range), the invalid drop and the jump');
});

t.test("firewalld's iptables shape: INPUT -> INPUT_ZONES -> IN_public -> ... REJECT with a deny chain before: refused, naming the rule", async (t) => {
  const f = filter(`:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:INPUT_ZONES - [0:0]
:IN_public - [0:0]
:IN_public_deny - [0:0]
:IN_public_allow - [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -j ACCEPT
-A INPUT -i lo -j ACCEPT
-A INPUT -j INPUT_ZONES
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -j REJECT --reject-with icmp-host-prohibited
-A INPUT_ZONES -g IN_public
-A IN_public -j IN_public_deny
-A IN_public -j IN_public_allow
-A IN_public -p icmp -j ACCEPT
-A IN_public -j REJECT --reject-with icmp-host-prohibited
-A IN_public_deny -s 10.60.66.6/32 -j DROP
-A IN_public_allow -p tcp -m tcp --dport 22 -m conntrack --ctstate NEW,UNTRACKED -j ACCEPT`);
  const { edit, unplaceable } = plan(f);
  t.same(edit.lines, [], 'nothing written');
  t.equal(unplaceable.length, 1);
  t.match(unplaceable[0]!.reason, /-A INPUT -j INPUT_ZONES/, 'the jump that leaves no place is named');
  t.match(unplaceable[0]!.reason, /IN_public_deny/);
  // A ban outside the opening's range denies none of its traffic: the jump is then its total denial.
  const other = plan(f, { ...web, from: ['10.61.0.0/16'], id: 'web/other' });
  t.same(other.unplaceable, []);
  t.match(other.edit.lines, [/^-I INPUT 3 -s 10\.61\.0\.0\/16 /]);
  // Without the deny chain the jump is the total denial: the accept goes before it.
  const plain = filter(`:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:INPUT_ZONES - [0:0]
:IN_public - [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -j INPUT_ZONES
-A INPUT_ZONES -g IN_public
-A IN_public -p tcp -m tcp --dport 22 -j ACCEPT
-A IN_public -j REJECT`);
  t.match(plan(plain).edit.lines, [/^-I INPUT 2 /], 'before the jump to a chain that ends in REJECT');
});

t.test('a chain whose policy accepts and that drops none of the traffic wholesale gets nothing; a range wider than a ban stays below it', async (t) => {
  const f = filter(`:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.60.9.0/24 -j DROP`);
  t.same(plan(f).edit.lines, [], 'the ban alone denies part of it; the rest passes');
  const g = filter(`:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.0.0.0/8 -j DROP
-A INPUT -p tcp --dport 22 -j ACCEPT`);
  t.match(plan(g).edit.lines, [/^-I INPUT 1 /], 'a drop of the whole range is the total denial: the accept goes before it');
});

t.test('a present accept above a partial denial is moved below it', async (t) => {
  const f = filter(`:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:f2b-recidive - [0:0]
-A INPUT -s 10.60.0.0/16 -p tcp -m tcp --dport 8443 -m comment --comment meshp:web/incoming/tcp/8443 -j ACCEPT
-A INPUT -j f2b-recidive
-A f2b-recidive -s 10.60.3.3/32 -j REJECT
-A f2b-recidive -j RETURN`);
  const { edit } = plan(f);
  t.match(edit.lines, [/^-D INPUT /, /^-A INPUT /]);
});

t.test(
  "DOCKER-USER: a published port's accept goes below the administrator's bans there, above its closing RETURN or a drop of all of it; Docker's chains untouched",
  async (t) => {
    const docker = `:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-ISOLATION-STAGE-1 - [0:0]
:DOCKER-USER - [0:0]
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o docker0 -j DOCKER
-A DOCKER ! -i docker0 -o docker0 -j DROP
-A DOCKER-ISOLATION-STAGE-1 -j RETURN`;
    const app: Opening = { ...web, id: 'app/forwarded/tcp/8080', port: 8080, path: 'forwarded' };
    // Docker's documented use: `iptables -I DOCKER-USER -s <addr> -j DROP`.
    const banned = plan(filter(`${docker}\n-A DOCKER-USER -s 10.60.3.66/32 -j DROP\n-A DOCKER-USER -j RETURN`), app);
    t.same(banned.unplaceable, []);
    t.equal(banned.edit.lines.length, 1);
    t.match(
      banned.edit.lines[0],
      /^-I DOCKER-USER 2 -s 10\.60\.0\.0\/16 -p tcp -m conntrack --ctorigdstport 8080 --ctdir ORIGINAL .*-j ACCEPT$/,
      'below the ban, above the RETURN',
    );
    const closed = plan(filter(`${docker}\n-A DOCKER-USER -s 10.60.3.66/32 -j DROP\n-A DOCKER-USER -p tcp -j DROP\n-A DOCKER-USER -j RETURN`), app);
    t.match(closed.edit.lines[0], /^-I DOCKER-USER 2 /, 'above a drop of all of it');
    const bare = plan(filter(`${docker}\n-A DOCKER-USER -j RETURN`), app);
    t.match(bare.edit.lines[0], /^-I DOCKER-USER 1 /, "Docker's own DOCKER-USER: above its RETURN");
    for (const p of [banned, closed, bare])
      t.notOk(
        p.edit.lines.some((l) => / DOCKER(-ISOLATION\S*)? /.test(l)),
        'nothing in DOCKER or DOCKER-ISOLATION-*',
      );
  },
);
