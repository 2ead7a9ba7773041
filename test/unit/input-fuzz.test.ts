/**
 * Validation that cannot crash (issue 13 item 7): generated declarations, catalogue modules and
 * policies — mostly plausible, with garbage in any field — go through the one schema. Each one is
 * either refused with a MESHP code, or accepted and then accepted by the drivers' own checks too
 * (nftables rule shapes, iptables-sized comments, Docker create options): a plan valid as a whole.
 * Runs: a fixed seed, then a random one (printed on failure). The budget is a number of runs, not time.
 */
import t from 'tap';
import fc from 'fast-check';
import { MeshpError, toOpening, type Declaration } from '@meshp/core';
import { validateDeclaration } from '@meshp/core/reconcile';
import { checkManifest } from '@meshp/core/catalogue';
import { checkModuleDefs, readPolicyFile } from '@meshp/core/schema';
import { shapesFor } from '@meshp/firewall-nftables';
import { createOptions } from '@meshp/runtime-docker';

/** Runs per kind and per seed: 2 seeds × (26,000 + 14,000 + 12,000) = 104,000 inputs. */
const RUNS = { declaration: 26_000, catalogue: 14_000, policy: 12_000 };
const FIXED_SEED = 1100013;
const RANDOM_SEED = Number(process.env.MESHP_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** A valid value most of the time, garbage sometimes. */
const or = <T>(valid: fc.Arbitrary<T>, weight = 6): fc.Arbitrary<unknown> =>
  fc.oneof({ weight, arbitrary: valid }, { weight: 1, arbitrary: fc.anything({ maxDepth: 2 }) });
const nameA = or(fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_.-]{0,12}$/), fc.constantFrom('a', 'x'.repeat(120), '-bad', 'ok.name', '')));
const portA = or(fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 1, max: 65535 }) }, fc.constantFrom(0, -1, 65536, 1.5, '80', null, Number.NaN)));
const rangeA = or(
  fc.oneof(
    fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 40 })).map(([a, l]) => `${a}/${l}`),
    fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 140 })).map(([a, l]) => `${a}/${l}`),
    fc.ipV4(),
    fc.constantFrom('300.1.1.1/99', 'dead/8', '10.0.0.0/', '/8', '{{privateRange}}', '::/0', '0.0.0.0/0'),
  ),
);
const pathA = or(
  fc.oneof(
    fc.array(fc.stringMatching(/^[a-z0-9_.-]{1,8}$/), { minLength: 1, maxLength: 4 }).map((s) => `/${s.join('/')}`),
    fc.constantFrom('etc/x', '/etc/../x', '/etc/./x', '/a//b', '/a\0b', '/', ''),
  ),
);
const modeA = or(fc.oneof(fc.stringMatching(/^0?[0-7]{3,4}$/), fc.constantFrom('6777', '0644', 'x', '999')));
const protoA = or(fc.constantFrom('tcp', 'udp', 'sctp', undefined));
const list = <T>(a: fc.Arbitrary<T>, max = 3) => or(fc.array(a, { maxLength: max }));
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const fileA = or(
  fc.record(
    { path: pathA, content: or(fc.string({ maxLength: 20 })), mode: opt(modeA), createOnce: opt(or(fc.boolean())) },
    { requiredKeys: ['path', 'content'] },
  ),
);
const containerA = or(
  fc.record(
    {
      name: nameA,
      image: or(fc.constantFrom('busybox:1', 'lab/web:1', '')),
      command: opt(list(or(fc.string({ maxLength: 8 })))),
      env: opt(or(fc.dictionary(fc.stringMatching(/^[A-Z_]{1,6}$/), or(fc.string({ maxLength: 8 })), { maxKeys: 3 }))),
      ports: opt(list(or(fc.record({ container: portA, host: portA, protocol: opt(protoA) }, { requiredKeys: ['container', 'host'] })))),
      mounts: opt(list(or(fc.record({ source: pathA, target: pathA, readOnly: opt(fc.boolean()) }, { requiredKeys: ['source', 'target'] })))),
      restart: opt(or(fc.constantFrom('no', 'always', 'unless-stopped', 'on-failure', 'sometimes'))),
    },
    { requiredKeys: ['name', 'image'] },
  ),
);
const openingA = or(
  fc.record(
    {
      id: opt(or(fc.oneof(nameA, fc.constant({ x: 1 })))),
      port: portA,
      protocol: opt(protoA),
      from: opt(list(rangeA)),
      path: or(fc.constantFrom('incoming', 'forwarded', 'sideways')),
    },
    { requiredKeys: ['port', 'path'] },
  ),
);
const moduleParts = { files: opt(list(fileA)), containers: opt(list(containerA)), openings: opt(list(openingA)) };
const moduleA = or(fc.record({ name: nameA, taken: or(fc.boolean()), ...moduleParts }, { requiredKeys: ['name', 'taken'] }));
const declarationA = or(
  fc.record(
    {
      apiVersion: or(fc.constant('meshp/v1')),
      node: nameA,
      mode: or(fc.constantFrom('adopted', 'converged')),
      settings: opt(
        or(
          fc.record(
            { ports: or(fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), portA, { maxKeys: 3 })), privateRange: opt(rangeA) },
            { requiredKeys: ['ports'] },
          ),
        ),
      ),
      modules: list(moduleA, 3),
    },
    { requiredKeys: ['apiVersion', 'node', 'mode', 'modules'] },
  ),
  12,
);
const catalogueA = or(fc.record({ name: nameA, ...moduleParts }, { requiredKeys: ['name'] }), 10);
const manifestA = or(
  fc.record(
    {
      apiVersion: or(fc.constant('meshp/v1')),
      kind: or(fc.constant('Module')),
      name: nameA,
      defaults: opt(or(fc.record({ ports: opt(or(fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), portA, { maxKeys: 2 }))) }))),
      ...moduleParts,
    },
    { requiredKeys: ['apiVersion', 'kind', 'name'] },
  ),
  10,
);
const policyA = or(
  fc.oneof(
    fc.record({
      rules: list(
        or(
          fc.record(
            { from: nameA, to: nameA, ports: opt(list(or(fc.oneof(portA, fc.constantFrom('80', '8000-8100', '53/udp', '9-1', 'eighty', '70000'))))) },
            { requiredKeys: ['from', 'to'] },
          ),
        ),
        4,
      ),
    }),
    fc.record({ rulez: fc.array(fc.anything({ maxDepth: 2 }), { maxLength: 2 }) }),
  ),
  10,
);

interface Tally {
  runs: number;
  accepted: number;
  refused: number;
  uncoded: string[];
  driverRefused: string[];
}

const tally = (): Tally => ({ runs: 0, accepted: 0, refused: 0, uncoded: [], driverRefused: [] });

/** What a driver checks of an accepted declaration before it touches anything. */
function driverChecks(d: Declaration): void {
  for (const m of d.modules) {
    for (const o of m.openings ?? []) {
      const op = toOpening(m.name, o);
      shapesFor(op, 'inet', d.settings.privateRange);
      if (new TextEncoder().encode(`meshp:${op.id}`).length > 256) throw new Error('an iptables comment cannot carry the id');
    }
    for (const c of m.containers ?? []) createOptions(c, { node: d.node, module: m.name, specHash: 'h' });
  }
}

function classify(s: Tally, input: unknown, check: () => Declaration | null): void {
  s.runs++;
  let accepted: Declaration | null;
  try {
    accepted = check();
  } catch (e) {
    if (e instanceof MeshpError) s.refused++;
    else if (s.uncoded.length < 5) s.uncoded.push(`${String(e)} for ${JSON.stringify(input)?.slice(0, 300)}`);
    else s.uncoded.push('');
    return;
  }
  s.accepted++;
  if (!accepted) return;
  try {
    driverChecks(accepted);
  } catch (e) {
    s.driverRefused.push(`${String(e)} for ${JSON.stringify(input)?.slice(0, 300)}`);
  }
}

const asDecl = (modules: unknown[]): Declaration =>
  validateDeclaration({
    apiVersion: 'meshp/v1',
    node: 'n1',
    mode: 'converged',
    settings: { ports: {}, privateRange: '100.96.0.0/16' },
    modules: (modules as object[]).map((m) => ({ ...m, taken: true })),
  });

function fuzz(seed: number, label: string): void {
  t.test(`${label} seed ${seed}: declarations, catalogue modules and policies`, async (t) => {
    const kinds: [string, fc.Arbitrary<unknown>, number, (x: unknown) => Declaration | null][] = [
      ['declaration', declarationA, RUNS.declaration, (x) => validateDeclaration(x)],
      [
        'catalogue module',
        catalogueA,
        RUNS.catalogue / 2,
        (x) => {
          const defs = checkModuleDefs([x]);
          // A catalogue module as a node gets it: the private range filled in.
          return asDecl(JSON.parse(JSON.stringify(defs).replace(/\{\{\s*privateRange\s*\}\}/g, '100.96.0.0/16')) as unknown[]);
        },
      ],
      ['catalogue manifest', manifestA, RUNS.catalogue / 2, (x) => (checkManifest(x, 'fuzz'), null)],
      ['policy', policyA, RUNS.policy, (x) => (readPolicyFile(x), null)],
    ];
    for (const [kind, arb, numRuns, check] of kinds) {
      const s = tally();
      fc.assert(
        fc.property(arb, (x) => classify(s, x, () => check(x))),
        { seed, numRuns, endOnFailure: true },
      );
      t.equal(s.runs, numRuns, `${kind}: ${s.runs} inputs (${s.accepted} accepted, ${s.refused} refused with a code)`);
      t.same(s.uncoded.filter(Boolean), [], `${kind}: 0 uncoded exceptions (seed ${seed}; MESHP_FUZZ_SEED=${seed} replays)`);
      t.same(s.driverRefused.slice(0, 5), [], `${kind}: 0 inputs accepted and then refused by a driver (seed ${seed})`);
      t.ok(s.accepted > numRuns / 50 || kind === 'catalogue manifest', `${kind}: the generator reaches valid inputs too (${s.accepted})`);
    }
  });
}

fuzz(FIXED_SEED, 'fixed');
fuzz(RANDOM_SEED, 'random');
