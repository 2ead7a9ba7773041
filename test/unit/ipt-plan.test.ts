import t from 'tap';
import type { Opening } from '@meshp/core';
import { buildArgs, desiredSpecs, parseCidr, parseMarked, parseSave, planEnsure, toOpenings, type SavedTable } from '@meshp/firewall-iptables';

const filter = (rules: string, policies = ':INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]'): SavedTable =>
  parseSave(`*filter\n${policies}\n${rules}\nCOMMIT\n`).tables[0]!;

const FOUND = [
  '-A INPUT -i lo -j ACCEPT',
  '-A INPUT -m conntrack --ctstate INVALID -j DROP',
  '-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT',
  '-A INPUT -j REJECT --reject-with icmp-port-unreachable',
].join('\n');

const open = (o: Partial<Opening> & Pick<Opening, 'port' | 'path'>): Opening => ({
  id: `m/${o.path}/tcp/${o.port}`,
  module: 'm',
  protocol: 'tcp',
  from: [],
  action: 'accept',
  ...o,
});

t.test('ranges are compared in the canonical form iptables prints', async (t) => {
  t.equal(parseCidr('10.1.2.3/24').text, '10.1.2.0/24');
  t.equal(parseCidr('10.1.2.3').text, '10.1.2.3/32');
  t.equal(parseCidr('FD00:0:0:1::5/64').text, 'fd00:0:0:1::/64');
  t.equal(parseCidr('2001:db8:0:0:1:0:0:1').text, '2001:db8::1:0:0:1/128');
  t.throws(() => parseCidr('10.0.0.0/33'), { code: 'MESHP_FIREWALL_FAILED' });
  t.throws(() => parseCidr('nope'), { code: 'MESHP_FIREWALL_FAILED' });
});

t.test('an accept goes just before the first drop point, after a ct invalid drop', async (t) => {
  const edit = planEnsure(filter(FOUND), desiredSpecs(4, filter(FOUND), { openings: [open({ port: 80, path: 'incoming' })], refusals: [] }));
  t.equal(edit.lines.length, 1);
  // The found chain drops every ct state INVALID packet above the place: the accept needs no state match (core's invalidDropAbove).
  t.match(edit.lines[0], /^-I INPUT 5 -p tcp -m tcp --dport 80 -m comment --comment meshp:m\/incoming\/tcp\/80 -j ACCEPT$/);
  // One written with `! --ctstate INVALID` before (an older meshp) stands: stricter, not wrong, not rewritten.
  const older = filter(
    FOUND.replace(
      '-A INPUT -j REJECT',
      '-A INPUT -p tcp -m tcp --dport 80 -m conntrack ! --ctstate INVALID -m comment --comment meshp:m/incoming/tcp/80 -j ACCEPT\n-A INPUT -j REJECT',
    ),
  );
  t.same(planEnsure(older, desiredSpecs(4, older, { openings: [open({ port: 80, path: 'incoming' })], refusals: [] })).lines, [], 'the older accept stands');
  // Where nothing drops invalid packets above it but the chain keeps them out (accepts of new connections only), the match is written.
  const newOnly = filter(
    [
      '-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A INPUT -p tcp -m tcp --dport 22 -m conntrack --ctstate NEW -j ACCEPT',
      '-A INPUT -j DROP',
    ].join('\n'),
  );
  t.match(
    planEnsure(newOnly, desiredSpecs(4, newOnly, { openings: [open({ port: 80, path: 'incoming' })], refusals: [] })).lines[0],
    /-m conntrack ! --ctstate INVALID /,
  );
});

t.test('an accept is appended when only the policy drops', async (t) => {
  const f = filter('-A INPUT -i lo -j ACCEPT');
  const edit = planEnsure(f, desiredSpecs(4, f, { openings: [open({ port: 80, path: 'incoming' })], refusals: [] }));
  t.match(edit.lines[0], /^-A INPUT /);
});

t.test('nothing is added to a chain that drops nothing', async (t) => {
  const f = filter('-A INPUT -i lo -j ACCEPT', ':INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]');
  t.same(desiredSpecs(4, f, { openings: [open({ port: 80, path: 'incoming' }), open({ port: 81, path: 'forwarded' })], refusals: [] }), []);
});

t.test('from ranges are split by family; a family with none of its ranges gets no rule', async (t) => {
  const o = open({ port: 80, path: 'incoming', from: ['10.0.0.0/8', 'fd00::/8'] });
  t.same(
    desiredSpecs(4, filter(FOUND), { openings: [o], refusals: [] }).map((s) => s.source),
    ['10.0.0.0/8'],
  );
  t.same(
    desiredSpecs(6, filter(FOUND), { openings: [o], refusals: [] }).map((s) => s.source),
    ['fd00::/8'],
  );
  const v4only = open({ port: 80, path: 'incoming', from: ['10.0.0.0/8'] });
  t.same(desiredSpecs(6, filter(FOUND), { openings: [v4only], refusals: [] }), []);
});

t.test('forwarded openings and refusals go to DOCKER-USER when it exists; refusals at its head', async (t) => {
  const f = filter(`${FOUND}\n-A DOCKER-USER -j RETURN`, ':INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:DOCKER-USER - [0:0]');
  const specs = desiredSpecs(4, f, {
    openings: [open({ port: 5432, path: 'forwarded', from: ['10.9.0.0/16'] })],
    refusals: [open({ id: 'mesh/store', port: 5432, path: 'forwarded', action: 'drop' })],
    privateRange: '10.9.0.0/16',
  });
  t.same(
    specs.map((s) => s.chain),
    ['DOCKER-USER', 'DOCKER-USER'],
  );
  const edit = planEnsure(f, specs);
  t.match(edit.lines[0], /^-I DOCKER-USER 1 -s 10\.9\.0\.0\/16 .*--ctorigdstport 5432 --ctdir ORIGINAL .*-j ACCEPT$/);
  t.match(edit.lines[1], /^-I DOCKER-USER 1 ! -s 10\.9\.0\.0\/16 .*-j DROP$/);
  const v6 = desiredSpecs(6, f, { openings: [], refusals: [open({ id: 'r', port: 5432, path: 'forwarded', action: 'drop' })], privateRange: '10.9.0.0/16' });
  t.same(
    v6.map((s) => [s.source, s.negated]),
    [[null, false]],
    'outside a v4 private range is all of IPv6',
  );
});

t.test('planning is idempotent and removes only marked rules that are no longer wanted', async (t) => {
  const a = open({ port: 80, path: 'incoming', from: ['10.0.0.0/8'] });
  const b = open({ port: 81, path: 'incoming' });
  const f0 = filter(FOUND);
  const ours = desiredSpecs(4, f0, { openings: [a, b], refusals: [] }).map(
    (s) =>
      `-A INPUT ${buildArgs(s)
        .map((x) => (x.includes(' ') ? `"${x}"` : x))
        .join(' ')}`,
  );
  const reject = FOUND.split('\n').at(-1)!;
  const f1 = filter(`${FOUND.split('\n').slice(0, -1).join('\n')}\n${ours.join('\n')}\n${reject}\n-A INPUT -m comment --comment "not ours" -j ACCEPT`);
  t.same(planEnsure(f1, desiredSpecs(4, f1, { openings: [a, b], refusals: [] })).lines, [], 'nothing to do');
  const edit = planEnsure(f1, desiredSpecs(4, f1, { openings: [a], refusals: [] }));
  t.same(edit.lines.length, 1);
  t.match(edit.lines[0], /^-D INPUT .*meshp:m\/incoming\/tcp\/81/);
  t.same(
    edit.removed.map((s) => s.id),
    [b.id],
  );
  t.match(edit.inverse[0], /^-I INPUT 6 /, 'the undo puts it back where it was');
  const late = filter(`${FOUND}\n${ours.join('\n')}`);
  t.same(
    planEnsure(late, desiredSpecs(4, late, { openings: [a, b], refusals: [] })).lines.map((l) => l.split(' ').slice(0, 3).join(' ')),
    ['-D INPUT -s', '-D INPUT -p', '-I INPUT 5', '-I INPUT 6'],
    'accepts found below the REJECT are moved above it',
  );
});

t.test('marked rules read back into the openings they came from', async (t) => {
  const a = open({ port: 80, path: 'incoming', from: ['10.0.0.0/8', 'fd00::/8'] });
  const r = open({ id: 'mesh/r', module: 'mesh', port: 5432, path: 'forwarded', action: 'drop' });
  const specs = [4, 6].flatMap((fam) => desiredSpecs(fam as 4 | 6, filter(FOUND), { openings: [a], refusals: [r], privateRange: '10.0.0.0/8' }));
  const back = specs.map((s) => parseMarked({ chain: s.chain, args: buildArgs(s) })!);
  t.same(
    toOpenings(back),
    [{ ...a }, { ...r }].sort((x, y) => x.id.localeCompare(y.id)),
  );
});

t.test("a refusal's own except range is spared, over the plugin's privateRange option", async (t) => {
  const r = open({ id: 'store/refuse', port: 15432, path: 'forwarded', action: 'drop', from: [], except: ['10.77.0.0/24'] });
  const [spec] = desiredSpecs(4, filter(FOUND), { openings: [], refusals: [r], privateRange: '10.70.0.0/16' });
  t.match(spec, { source: '10.77.0.0/24', negated: true, action: 'drop' });
});

t.test('many accepts and an incoming refusal in one chain land in order, each just before the drop point', async (t) => {
  const stale = '-A INPUT -p tcp -m tcp --dport 1 -m comment --comment meshp:old/incoming/tcp/1 -j ACCEPT';
  const f = filter([FOUND.split('\n').slice(0, 4).join('\n'), stale, '-A INPUT -j REJECT --reject-with icmp-port-unreachable'].join('\n'));
  const openings = [80, 81, 82].map((port) => open({ port, path: 'incoming' }));
  const refusal = { ...open({ port: 23, path: 'incoming' }), action: 'drop' as const };
  const edit = planEnsure(f, desiredSpecs(4, f, { openings, refusals: [refusal] }));
  // Replay the lines on the chain, the way iptables-restore applies them in order.
  const chain = f.rules.filter((r) => r.chain === 'INPUT').map((r) => r.args.join(' '));
  for (const line of edit.lines) {
    const [op, , ...rest] = line.split(' ');
    if (op === '-D') chain.splice(chain.indexOf(rest.join(' ').replace(/"/g, '')), 1);
    else if (op === '-I') chain.splice(Number(rest[0]) - 1, 0, rest.slice(1).join(' '));
    else chain.push(rest.join(' '));
  }
  const ports = chain.map((r) => /--dport (\d+)/.exec(r)?.[1] ?? (r.includes('REJECT') ? 'REJECT' : r.includes('INVALID') ? 'INVALID' : '-'));
  t.same(
    ports,
    ['23', '-', 'INVALID', '-', '22', '80', '81', '82', 'REJECT'],
    'refusal at the head, the accepts in order just before REJECT, the stale rule gone',
  );
});
