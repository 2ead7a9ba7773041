/** The placement rule on nftables shapes met in the wild: after every partial denial, before the first total one. */
import t from 'tap';
import type { Opening } from '@meshp/core';
import { parseRuleset, planEnsure } from '@meshp/firewall-nftables';

const web: Opening = { id: 'web/incoming/tcp/7443', module: 'web', port: 7443, protocol: 'tcp', from: ['10.80.0.0/16'], path: 'incoming', action: 'accept' };

function rs(input: object[], chains: Record<string, object[]> = {}, policy = 'drop') {
  return parseRuleset(
    JSON.stringify({
      nftables: [
        { table: { family: 'inet', name: 'filter', handle: 1 } },
        { chain: { family: 'inet', table: 'filter', name: 'input', handle: 1, type: 'filter', hook: 'input', prio: 0, policy } },
        ...Object.keys(chains).map((name, i) => ({ chain: { family: 'inet', table: 'filter', name, handle: 2 + i } })),
        ...input.map((r, i) => ({ rule: { family: 'inet', table: 'filter', chain: 'input', handle: 10 + i, ...r } })),
        ...Object.entries(chains).flatMap(([name, rules], c) =>
          rules.map((r, i) => ({ rule: { family: 'inet', table: 'filter', chain: name, handle: 100 * (c + 1) + i, ...r } })),
        ),
      ],
    }),
  );
}
const jump = (target: string) => ({ expr: [{ jump: { target } }] });
const lo = { expr: [{ match: { op: '==', left: { meta: { key: 'iifname' } }, right: 'lo' } }, { accept: null }] };
const estab = { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: ['established', 'related'] } }, { accept: null }] };
const invalidDrop = { expr: [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'invalid' } }, { drop: null }] };
const ssh = { expr: [{ match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: 22 } }, { accept: null }] };
const reject = { expr: [{ log: { prefix: 'rejected: ' } }, { counter: null }, { reject: null }] };
const ban = (addr: string) => ({ expr: [{ match: { op: '==', left: { payload: { protocol: 'ip', field: 'saddr' } }, right: addr } }, { reject: null }] });

t.test('puppet-nftables: the accept goes below `jump global` (its chain drops ct state invalid), above the final reject', async (t) => {
  const plan = planEnsure(rs([lo, jump('global'), jump('default_in'), reject], { global: [estab, invalidDrop], default_in: [ssh] }), [web], []);
  t.equal(plan.additions.length, 1);
  t.equal(plan.additions[0]!.before?.handle, 13, 'before the reject');
  t.equal(plan.additions[0]!.after?.handle, 12, 'after the jumps');
});

t.test('below a plain ct state invalid drop the accept carries no state match; one that has it stands', async (t) => {
  const plan = planEnsure(rs([estab, invalidDrop, ssh, reject]), [web], []);
  t.equal(plan.additions.length, 1);
  t.notOk(plan.additions[0]!.shape.valid, 'no ct state != invalid: the chain dropped every invalid packet above');
  t.equal(plan.additions[0]!.before?.handle, 13, 'before the reject');
  const valid = { match: { op: '!=', left: { ct: { key: 'state' } }, right: 'invalid' } };
  const older = {
    expr: [
      { match: { op: '==', left: { payload: { protocol: 'ip', field: 'saddr' } }, right: { prefix: { addr: '10.80.0.0', len: 16 } } } },
      { match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: 7443 } },
      valid,
      { accept: null },
    ],
    comment: 'meshp:web/incoming/tcp/7443',
  };
  const kept = planEnsure(rs([estab, invalidDrop, ssh, older, reject]), [web], []);
  t.same(kept.commands, [], 'an accept written with the match before stands: stricter, not wrong');
  // Above the invalid drop, no: it is replaced by one below it.
  const above = planEnsure(rs([estab, older, invalidDrop, ssh, reject]), [web], []);
  t.equal(above.additions.length, 1, 'one above the invalid drop is placed again');
});

t.test('a ban inside the range above the reject: the accept goes between them', async (t) => {
  const plan = planEnsure(rs([estab, ban('10.80.3.66'), ssh, reject], {}, 'accept'), [web], []);
  t.equal(plan.additions[0]!.before?.handle, 13);
  t.equal(plan.additions[0]!.after?.handle, 12);
  const outside = planEnsure(rs([estab, ban('192.0.2.1'), ssh, reject], {}, 'accept'), [web], []);
  t.equal(outside.additions[0]!.before?.handle, 13, 'a ban outside the range changes nothing: still just before the reject');
});

t.test('a jumped-to chain that bans part of the range and rejects the rest leaves no place: refused, nothing written', async (t) => {
  const unplaceable: { id: string; reason: string }[] = [];
  const plan = planEnsure(rs([estab, jump('zone')], { zone: [ban('10.80.3.66'), ssh, reject] }, 'accept'), [web], [], undefined, unplaceable);
  t.same(plan.additions, []);
  t.same(plan.commands, []);
  t.equal(unplaceable.length, 1);
  t.match(unplaceable[0]!.reason, /inet filter input handle 11 \(jump zone\)/, 'the jump is named');
  t.match(unplaceable[0]!.reason, /zone handle 100 \(reject\), which denies part/, 'and the ban behind it');
});

t.test('a present accept above a partial denial is replaced below it', async (t) => {
  const ours = {
    comment: 'meshp:web/incoming/tcp/7443',
    expr: [
      { match: { op: '==', left: { payload: { protocol: 'ip', field: 'saddr' } }, right: { prefix: { addr: '10.80.0.0', len: 16 } } } },
      { match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: 7443 } },
      { accept: null },
    ],
  };
  const plan = planEnsure(rs([ours, jump('global'), reject], { global: [invalidDrop] }), [web], []);
  t.equal(plan.head.filter((c) => 'delete' in c).length, 1, 'the misplaced one deleted');
  t.equal(plan.additions[0]!.before?.handle, 12, 'and written again before the reject');
});
