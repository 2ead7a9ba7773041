import t from 'tap';
import type { Opening } from '@meshp/core';
import { buildRule, canonical, classifyTable, parseCidr, parseRuleset, parseShape, planEnsure, shapesFor, type NftRule } from '@meshp/firewall-nftables';

const web: Opening = {
  id: 'web/incoming/tcp/9000',
  module: 'web',
  port: 9000,
  protocol: 'tcp',
  from: ['10.8.0.0/16', '10.9.0.0/24', 'fd00::/8'],
  path: 'incoming',
  action: 'accept',
};

function ruleset(rules: object[], extra: object[] = []) {
  return parseRuleset(
    JSON.stringify({
      nftables: [
        { table: { family: 'inet', name: 'filter', handle: 1 } },
        { chain: { family: 'inet', table: 'filter', name: 'input', handle: 1, type: 'filter', hook: 'input', prio: 0, policy: 'drop' } },
        { chain: { family: 'inet', table: 'filter', name: 'forward', handle: 2, type: 'filter', hook: 'forward', prio: 0, policy: 'accept' } },
        ...rules.map((r, i) => ({ rule: { family: 'inet', table: 'filter', chain: 'input', handle: 10 + i, ...r } })),
        ...extra,
      ],
    }),
  );
}
const established = { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: ['established', 'related'] } }, { accept: null }] };
const invalid = { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'invalid' } }, { drop: null }] };
const ssh = { expr: [{ match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: 22 } }, { accept: null }] };
const reject = { expr: [{ counter: { packets: 0, bytes: 0 } }, { reject: null }] };

t.test('address lists reduce to the same canonical CIDRs nft lists back', async (t) => {
  t.same(canonical(['10.9.0.0/24', '10.8.0.0/16', '10.8.1.0/24'].map(parseCidr)), ['10.8.0.0/16', '10.9.0.0/24']);
  t.same(canonical([{ family: 'ip', lo: parseCidr('10.8.0.0').lo, hi: parseCidr('10.9.0.255').lo }]), ['10.8.0.0/16', '10.9.0.0/24']);
  t.same(canonical(['10.0.0.1/24', '10.0.1.0/24'].map(parseCidr)), ['10.0.0.0/23'], 'host bits masked, neighbours merged');
  t.same(canonical(['fd00:0:0:0::1/8', '::ffff:10.0.0.1'].map(parseCidr)), ['::ffff:a00:1/128', 'fd00::/8']);
});

t.test('every rule we write reads back as the shape it was built from', async (t) => {
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [] };
  const cases: [Opening, 'inet' | 'ip' | 'ip6', string?][] = [
    [web, 'inet'],
    [web, 'ip'],
    [web, 'ip6'],
    [{ ...web, from: [] }, 'inet'],
    [{ ...web, from: ['0.0.0.0/0'], protocol: 'udp', path: 'forwarded' }, 'inet'],
    [refusal, 'inet', '10.70.0.0/16'],
    [refusal, 'inet'],
  ];
  for (const [o, family, priv] of cases) {
    for (const shape of shapesFor(o, family, priv)) {
      const rule = buildRule(shape, { family, table: 'filter', chain: 'input' });
      t.same(parseShape(rule, o.id), shape, `${o.id} in ${family} (${shape.nf})`);
      if (shape.verdict === 'accept') {
        const valid = { ...shape, valid: true };
        t.same(
          parseShape(buildRule(valid, { family, table: 'filter', chain: 'input' }), o.id),
          valid,
          `${o.id} in ${family} (${shape.nf}), ct state != invalid`,
        );
      }
    }
  }
  t.same(
    shapesFor(web, 'ip').map((s) => s.cidrs),
    [['10.8.0.0/16', '10.9.0.0/24']],
    'an ip table gets only the IPv4 ranges',
  );
  t.same(shapesFor({ ...web, from: ['fd00::/8'] }, 'ip'), [], 'and nothing when the opening is IPv6 only');
});

t.test('an accept goes just before their first drop by handle, after their ct state invalid drop', async (t) => {
  const rs = ruleset([established, invalid, ssh, reject]);
  const plan = planEnsure(rs, [web], []);
  t.equal(plan.commands.length, 2);
  for (const c of plan.commands) {
    const rule = (c as { insert: { rule: NftRule } }).insert.rule;
    t.equal(rule.handle, 13, 'inserted before the reject (handle 13), not at the head');
    t.equal(rule.comment, 'meshp:web/incoming/tcp/9000');
  }
  t.ok(
    plan.additions.every((a) => a.before?.handle === 13 && a.after?.handle === 12),
    'in nft syntax: placed right after the rule before the reject (handle 12)',
  );
  t.same(plan.added, [web.id]);
});

t.test('the rule an accept is placed after is one the batch keeps; with none before the drop, only the drop is named', async (t) => {
  const stale = { comment: 'meshp:old/incoming/tcp/1', expr: ssh.expr };
  const plan = planEnsure(ruleset([established, invalid, ssh, stale, reject]), [web], []);
  t.same(Object.keys(plan.commands[0]!), ['delete'], 'the stale marked rule (handle 13) goes first');
  t.ok(
    plan.additions.every((a) => a.before?.handle === 14 && a.after?.handle === 12),
    'placed after handle 12, not after the deleted 13',
  );
  const first = planEnsure(ruleset([reject, ssh]), [web], []);
  t.ok(
    first.additions.every((a) => a.before?.handle === 10 && !a.after),
    'the drop is the first rule: inserted before it',
  );
});

t.test('when only the policy drops, the accept is appended at the end', async (t) => {
  const plan = planEnsure(ruleset([established, ssh]), [web], []);
  t.ok(plan.commands.every((c) => 'add' in c && 'rule' in c.add));
});

t.test('a chain that does not drop gets no opening; the mesh table holds the refusals', async (t) => {
  const fwd: Opening = { ...web, id: 'f', path: 'forwarded' };
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [] };
  const plan = planEnsure(ruleset([reject]), [fwd], [refusal]);
  const json = JSON.stringify(plan.commands);
  t.notMatch(json, /"comment":"meshp:f"/, 'their forward chain accepts: nothing to open');
  t.match(json, /"table":\{"family":"inet","name":"meshp"\}/);
  t.match(json, /"table":"meshp","chain":"forward","comment":"meshp:r"/);
});

t.test('the mesh table: there while the mesh has anything in the firewall (it carries the receipt), its chains only while refusals are', async (t) => {
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [] };
  const meshTable = { table: { family: 'inet', name: 'meshp', handle: 9 } };
  const receipt = { set: { family: 'inet', table: 'meshp', name: 'receipt', type: 'mark', handle: 1, elem: [5] } };
  const meshChains = ['input', 'forward'].map((name, i) => ({
    chain: { family: 'inet', table: 'meshp', name, handle: 2 + i, type: 'filter', hook: name, prio: 0, policy: 'accept' },
  }));
  const refused = planEnsure(ruleset([reject]), [], [refusal]);
  const refusalRules = refused.additions.map((a, i) => ({
    rule: { ...buildRule(a.shape, { family: 'inet', table: 'meshp', chain: a.chain.name }), handle: 30 + i },
  }));
  const ours = shapesFor(web, 'inet').map((s) => {
    const { family: _f, table: _tb, chain: _c, ...r } = buildRule(s, { family: 'inet', table: 'filter', chain: 'input' });
    return r;
  });

  const first = planEnsure(ruleset([reject]), [web], []);
  t.equal(first.meshAfter, true, 'an opening alone: the receipt will make the table');
  t.notMatch(JSON.stringify(first.commands), /meshp"/, 'no mesh chains for openings alone');

  const dropped = planEnsure(ruleset([...ours, reject], [meshTable, ...meshChains, receipt, ...refusalRules]), [web], []);
  t.same(
    dropped.head.map((c) => JSON.stringify(c)),
    [
      ...refusalRules.map((r) => JSON.stringify({ delete: { rule: { family: 'inet', table: 'meshp', chain: r.rule.chain, handle: r.rule.handle } } })),
      JSON.stringify({ delete: { chain: { family: 'inet', table: 'meshp', name: 'input' } } }),
      JSON.stringify({ delete: { chain: { family: 'inet', table: 'meshp', name: 'forward' } } }),
    ],
    'the last refusal goes: its rules, then the two chains, the table stays',
  );
  t.same(dropped.removed, ['r']);
  t.equal(dropped.meshAfter, true);

  const settled = planEnsure(ruleset([...ours, reject], [meshTable, receipt]), [web], []);
  t.same(settled.commands, [], 'the table with only its receipt, the opening in place: nothing to do');

  const gone = planEnsure(ruleset([...ours, reject], [meshTable, receipt]), [], []);
  t.same(gone.commands.at(-1), { delete: { table: { family: 'inet', name: 'meshp' } } }, 'nothing of the mesh wanted: the table goes');
  t.equal(gone.meshAfter, false, 'and no receipt can be read after');
});

t.test('what is present and effective is kept; marked and unwanted goes; unmarked is never touched', async (t) => {
  // The found chain drops ct state invalid: our accepts carry `ct state != invalid`.
  const ours = shapesFor(web, 'inet').map((s) => {
    const { family: _f, table: _t, chain: _c, ...r } = buildRule({ ...s, valid: true }, { family: 'inet', table: 'filter', chain: 'input' });
    return r;
  });
  const stale = { comment: 'meshp:old/incoming/tcp/1', expr: ssh.expr };
  const rs = ruleset([established, invalid, ...ours, stale, reject]);
  const plan = planEnsure(rs, [web], []);
  t.same(plan.commands, [{ delete: { rule: { family: 'inet', table: 'filter', chain: 'input', handle: 14 } } }]);
  t.same(plan.removed, ['old/incoming/tcp/1']);
  t.same(planEnsure(ruleset([established, invalid, ...ours, reject]), [web], []).commands, [], 'nothing to do: no batch');
});

t.test('our accept found after their drop is moved before it', async (t) => {
  const ours = shapesFor({ ...web, from: [] }, 'inet').map((s) => buildRule(s, { family: 'inet', table: 'filter', chain: 'input' }));
  const rs = ruleset([reject, ...ours.map(({ comment, expr }) => ({ comment, expr }))]);
  const plan = planEnsure(rs, [{ ...web, from: [] }], []);
  t.same(
    plan.commands.map((c) => Object.keys(c)[0]),
    ['delete', 'insert'],
  );
});

t.test('tables of iptables-nft, firewalld, Docker and the mesh are not found tables', async (t) => {
  const rs = parseRuleset(
    JSON.stringify({
      nftables: [
        { table: { family: 'ip', name: 'filter' } },
        { chain: { family: 'ip', table: 'filter', name: 'INPUT', type: 'filter', hook: 'input', prio: 0, policy: 'drop' } },
        { table: { family: 'ip6', name: 'mangle' } },
        { rule: { family: 'ip6', table: 'mangle', chain: 'X', expr: [{ xt: { type: 'match', name: 'comment' } }, { accept: null }] } },
        { table: { family: 'inet', name: 'firewalld' } },
        { table: { family: 'ip', name: 'docker-bridges' } },
        { table: { family: 'inet', name: 'meshp' } },
        { table: { family: 'inet', name: 'meshp_derived' } },
        { table: { family: 'ip', name: 'filter2' } },
        { table: { family: 'bridge', name: 'x' } },
      ],
    }),
  );
  t.same(
    rs.tables.map((x) => classifyTable(x, rs)),
    ['iptables-nft', 'iptables-nft', 'firewalld', 'docker', 'mesh', 'derived', 'found', 'other'],
  );
});

t.test("a refusal's own except ranges are spared, over the plugin's privateRange option", async (t) => {
  const refusal: Opening = { ...web, id: 'r', path: 'forwarded', action: 'drop', from: [], except: ['10.77.0.0/24'] };
  const shapes = shapesFor(refusal, 'inet', '10.70.0.0/16');
  const v4 = shapes.find((s) => s.nf === 'ip');
  t.same(v4?.cidrs, ['10.77.0.0/24']);
  t.equal(v4?.negate, true, 'dropped from everywhere outside the spared range');
});

t.test('a jump (or goto) to a regular chain that drops is a drop point: the accept goes before the jump', async (t) => {
  const jumpTo = (target: string, kind = 'jump', matches: object[] = []) => ({ expr: [...matches, { [kind]: { target } }] });
  const chain = (name: string, rules: object[]) => [
    { chain: { family: 'inet', table: 'filter', name, handle: 50 + name.length } },
    ...rules.map((r, i) => ({ rule: { family: 'inet', table: 'filter', chain: name, handle: 100 + 10 * name.length + i, ...r } })),
  ];
  const accepting = { chain: { family: 'inet', table: 'filter', name: 'input', handle: 1, type: 'filter', hook: 'input', prio: 0, policy: 'accept' } };
  const rs = (rules: object[], extra: object[]) =>
    parseRuleset(
      JSON.stringify({
        nftables: [
          { table: { family: 'inet', name: 'filter', handle: 1 } },
          accepting,
          ...rules.map((r, i) => ({ rule: { family: 'inet', table: 'filter', chain: 'input', handle: 10 + i, ...r } })),
          ...extra,
        ],
      }),
    );
  // input (policy accept): established, jump to "logs" (does not drop), jump to "guard", which jumps to "deny", which drops.
  const nested = rs(
    [established, jumpTo('logs'), ssh, jumpTo('guard')],
    [...chain('logs', [{ expr: [{ counter: null }] }]), ...chain('guard', [jumpTo('deny')]), ...chain('deny', [{ expr: [{ drop: null }] }])],
  );
  const plan = planEnsure(nested, [web], []);
  t.equal(plan.additions.length, 2, 'the accept-policy chain drops through its jump, so it gets the opening');
  t.ok(
    plan.additions.every((a) => a.before?.handle === 13),
    'inserted before the jump to the dropping chain, not before the one to a chain that only counts',
  );

  const viaGoto = rs([jumpTo('deny', 'goto')], chain('deny', [{ expr: [{ reject: null }] }]));
  t.equal(planEnsure(viaGoto, [web], []).additions[0]?.before?.handle, 10, 'a goto counts the same');

  const invalidOnly = { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'invalid' } }, { jump: { target: 'deny' } }] };
  const stateJump = rs([invalidOnly, jumpTo('deny')], chain('deny', [{ expr: [{ drop: null }] }]));
  t.equal(planEnsure(stateJump, [web], []).additions[0]?.before?.handle, 11, 'a jump on ct state invalid alone is passed, like ct state invalid drop');

  const harmless = rs([jumpTo('logs')], chain('logs', [{ expr: [{ counter: null }] }]));
  t.equal(planEnsure(harmless, [web], []).additions.length, 0, 'a chain that drops nowhere gets nothing');
});

t.test(
  "openings that share an address list share their rules' address part, frozen; the list, family, action and spared ranges each tell parts apart",
  async (t) => {
    const a = shapesFor(web, 'inet');
    const b = shapesFor({ ...web, id: 'other', port: 9001 }, 'inet');
    t.equal(a[0]!.cidrs, b[0]!.cidrs, 'the same array');
    t.ok(Object.isFrozen(a[0]!.cidrs));
    t.throws(() => a[0]!.cidrs.push('10.0.0.0/8'));
    t.same(
      shapesFor(web, 'ip').map((s) => s.nf),
      ['ip'],
      'another family, other parts',
    );
    const refusal: Opening = { ...web, action: 'drop', from: [] };
    t.same(
      shapesFor(refusal, 'inet', '10.70.0.0/16').map((s) => s.cidrs),
      [['10.70.0.0/16'], []],
      'IPv6: dropped from everywhere',
    );
    t.same(
      shapesFor(refusal, 'inet', '10.71.0.0/16').map((s) => s.cidrs),
      [['10.71.0.0/16'], []],
      'another private range',
    );
    t.same(
      shapesFor({ ...refusal, except: ['10.72.0.0/16'] }, 'inet', '10.70.0.0/16').map((s) => s.cidrs),
      [['10.72.0.0/16'], []],
      'its own except wins',
    );
    t.same(
      shapesFor({ ...web, from: [] }, 'inet').map((s) => s.nf),
      ['any'],
    );
  },
);

t.test('an id that cannot be carried in a comment is refused only where a rule needs it', async (t) => {
  const long: Opening = { ...web, id: `web/${'é'.repeat(70)}` };
  t.throws(() => shapesFor(long, 'inet'), { code: 'MESHP_FIREWALL_FAILED' }, '6 + 140 bytes');
  t.doesNotThrow(() => shapesFor({ ...web, id: `web/${'e'.repeat(118)}` }, 'inet'), '128 bytes exactly');
  t.throws(() => shapesFor({ ...web, id: `web/${'e'.repeat(119)}` }, 'inet'), { code: 'MESHP_FIREWALL_FAILED' }, '129 bytes');
  t.throws(() => planEnsure(ruleset([reject]), [long], []), { code: 'MESHP_FIREWALL_FAILED' }, 'their input chain drops: refused');
  t.same(planEnsure(ruleset([]), [{ ...long, path: 'forwarded' }], []).commands, [], 'their forward chain does not drop: nothing written, nothing refused');
});
