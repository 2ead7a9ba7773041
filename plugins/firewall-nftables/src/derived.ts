/**
 * The mesh's own table on a converged node: drop by default on input and forward, established
 * and loopback traffic allowed, refusals first, then the openings.
 */
import type { DerivedFilter, Opening } from '@meshp/core';
import { DERIVED_TABLE } from './classify.js';
import { buildRule, shapesFor } from './shape.js';
import type { Command, Expr, NftRule } from './schema.js';

const T = { family: 'inet', table: DERIVED_TABLE } as const;

const ESTABLISHED: Expr[] = [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: ['established', 'related'] } }, { accept: null }];
const INVALID: Expr[] = [{ match: { op: 'in', left: { ct: { key: 'state' } }, right: 'invalid' } }, { drop: null }];
const LOOPBACK: Expr[] = [{ match: { op: '==', left: { meta: { key: 'iif' } }, right: 'lo' } }, { accept: null }];
/** Without neighbour discovery IPv6 stops working; path-MTU and errors must pass too. */
const ICMPV6: Expr[] = [
  {
    match: {
      op: '==',
      left: { payload: { protocol: 'icmpv6', field: 'type' } },
      right: {
        set: [
          'nd-neighbor-solicit',
          'nd-neighbor-advert',
          'nd-router-advert',
          'packet-too-big',
          'destination-unreachable',
          'time-exceeded',
          'parameter-problem',
        ],
      },
    },
  },
  { accept: null },
];
const ICMP: Expr[] = [
  {
    match: {
      op: '==',
      left: { payload: { protocol: 'icmp', field: 'type' } },
      right: { set: ['destination-unreachable', 'time-exceeded', 'parameter-problem'] },
    },
  },
  { accept: null },
];

function plain(chain: string, expr: Expr[]): Command {
  return { add: { rule: { ...T, chain, expr } } };
}

function marked(o: Opening, chain: string, privateRange?: string): Command[] {
  return shapesFor(o, 'inet', privateRange).map((s) => ({ add: { rule: buildRule(s, { ...T, chain }) as NftRule } }));
}

export function derivedBatch(filter: DerivedFilter): Command[] {
  const refusals = filter.refusals.map((r): Opening => ({ ...r, action: 'drop' }));
  const id = { family: 'inet', name: DERIVED_TABLE } as const;
  const cmds: Command[] = [
    { add: { table: { ...id } } },
    { delete: { table: { ...id } } },
    { add: { table: { ...id } } },
    { add: { chain: { ...T, name: 'input', type: 'filter', hook: 'input', prio: 0, policy: 'drop' } } },
    { add: { chain: { ...T, name: 'forward', type: 'filter', hook: 'forward', prio: 0, policy: 'drop' } } },
    plain('input', ESTABLISHED),
    plain('input', INVALID),
    plain('input', LOOPBACK),
    plain('input', ICMPV6),
    plain('input', ICMP),
    plain('forward', ESTABLISHED),
  ];
  for (const [path, chain] of [
    ['incoming', 'input'],
    ['forwarded', 'forward'],
  ] as const) {
    for (const r of refusals.filter((x) => x.path === path)) cmds.push(...marked(r, chain, filter.privateRange));
    for (const o of filter.openings.filter((x) => x.path === path && x.action === 'accept')) cmds.push(...marked(o, chain));
  }
  return cmds;
}
