/**
 * The firewall-kind conformance suite: what every firewall driver promises (`@meshp/core`'s
 * FirewallDriver), checked with real packets on the kit's namespaces. A plugin author hands it a
 * `setup` that loads a found firewall of their kind into the lab's server and returns their plugin
 * speaking to it; the checks share one lab, put back between them by the found firewall's reload.
 *
 * The found firewall `setup` loads: allows tcp/8080 from anywhere and established traffic, and
 * denies every other incoming connection (a policy drop or a final drop/reject), on IPv4 and IPv6
 * alike (the reach walk reads both: a family left open is reported open, as it is).
 */
import type { FirewallDriver, Opening, Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import type { KitTest, Teardown } from './kit-test.js';
import { ADDRESSES, lab, labUnavailable, type KitLab } from './lab.js';

export interface FirewallKitBed {
  /** The author's plugin, set up to speak to `lab.server` (its runner or namespace option). */
  plugin: Plugin;
  /** The found firewall's own reload, as its service does it (the mesh's rules may be lost). */
  reload(): Promise<void>;
  /** The found firewall's rules without the mesh's marked ones, as comparable lines. */
  foundRules(): Promise<string[]>;
}

/** The checks, by name: what `known` marks. */
export type FirewallCheck = 'detect' | 'openings' | 'marked-only' | 'reload' | 'reach' | 'retire' | 'derived';

export interface FirewallKitSpec {
  /** The kind the plugin's driver answers with. */
  kind: string;
  setup(lab: KitLab): Promise<FirewallKitBed>;
  /**
   * Checks known to fail, each with the bug that makes it fail: run and reported as tap todos,
   * so the run stays green and the bug stays in sight. Remove an entry when its bug is fixed.
   */
  known?: Partial<Record<FirewallCheck, string>>;
}

export const FOUND_PORT = 8080;
export const MESH_PORT = 9090;

/** The opening every check declares: tcp/9090 on the input path, from the private range. */
export const KIT_OPENING: Opening = Object.freeze({
  id: `kit/incoming/tcp/${MESH_PORT}`,
  module: 'kit',
  port: MESH_PORT,
  protocol: 'tcp',
  from: [ADDRESSES.privateRange],
  path: 'incoming',
  action: 'accept',
}) as Opening;

interface Bed extends FirewallKitBed {
  lab: KitLab;
  driver: FirewallDriver;
}

async function bed(t: Teardown, spec: FirewallKitSpec): Promise<Bed> {
  const l = await lab(t);
  const b = await spec.setup(l);
  const driver = await new Host({ root: l.root, firewall: spec.kind }).use(b.plugin).firewall();
  if (!driver) throw new Error(`no driver for ${spec.kind}: the plugin recorded no sighting with one`);
  await l.serve(FOUND_PORT);
  await l.serve(MESH_PORT);
  return { ...b, lab: l, driver };
}

/**
 * One lab for all the checks of a run (a lab costs seconds): the first check finds it as `setup`
 * left it. A check that passed leaves it so, but for its openings: the next one starts with an
 * `ensure` of nothing. After a check that failed, the found firewall's own reload comes first, so
 * one failure (an opening, a retirement or a derived filter left behind) does not fail the rest.
 */
function sharedBed(t: KitTest, spec: FirewallKitSpec): { fresh(): Promise<Bed>; done(passed: boolean): void } {
  let made: Promise<Bed> | undefined;
  let clean = true;
  return {
    async fresh() {
      if (!made) return (made = bed(t, spec));
      const b = await made;
      if (!clean) await b.reload();
      await b.driver.ensure([], []);
      return b;
    },
    done(passed) {
      clean = passed;
    },
  };
}

/** Registers one check as a subtest: a known bug makes it a todo; how it ended tells the shared lab whether to reload. */
type Check = (id: FirewallCheck, name: string, fn: (t: KitTest) => Promise<void>) => void;

/** What each group of checks is given: the spec, the way to register a check, and the lab as the check should find it. */
interface Suite {
  spec: FirewallKitSpec;
  check: Check;
  fresh(): Promise<Bed>;
}

function suite(t: KitTest, spec: FirewallKitSpec): Suite {
  const shared = sharedBed(t, spec);
  const check: Check = (id, name, fn) => {
    const bug = spec.known?.[id];
    t.test(`${spec.kind}: ${name}`, bug ? { todo: `known bug: ${bug}` } : {}, async (t) => {
      let threw = true;
      try {
        await fn(t);
        threw = false;
      } finally {
        // tap's `passing()`; a test object without it is taken as failed. A known bug may leave a mess.
        shared.done(!threw && !bug && (t.passing?.() ?? false));
      }
    });
  };
  return { spec, check, fresh: () => shared.fresh() };
}

/** The found firewall as setup loaded it: detected as the kind, and the lab as the kit expects. */
function detectionChecks(s: Suite): void {
  s.check('detect', `the plugin detects the found firewall as its kind, active, and the lab is as the kit expects`, async (t) => {
    const b = await s.fresh();
    t.equal(b.driver.kind, s.spec.kind);
    t.ok((await b.driver.describe()).active, 'described active');
    const auto = await new Host({ root: b.lab.root }).use(b.plugin).firewall();
    t.equal(auto?.kind, s.spec.kind, 'found without being named (--firewall auto)');
    t.ok(await b.lab.reaches('outside', FOUND_PORT), `the found firewall allows ${FOUND_PORT}`);
    t.notOk(await b.lab.reaches('client', MESH_PORT), `and denies ${MESH_PORT}, also from the private range`);
  });
}

/** An opening: reachable from its range only, read back, idempotent, only marked rules touched, mended after a reload. */
function openingChecks(s: Suite): void {
  const o = KIT_OPENING;
  s.check('openings', `an opening is reachable from its range only, read back, and idempotent`, async (t) => {
    const b = await s.fresh();
    t.same(await b.driver.ensure([o], []), { added: [o.id], removed: [] });
    t.ok(await b.lab.reaches('client', MESH_PORT), 'reachable from the private range');
    t.notOk(await b.lab.reaches('outside', MESH_PORT), 'not from outside');
    t.same(await b.driver.openings(), [o], 'read back as written');
    t.same(await b.driver.ensure([o], []), { added: [], removed: [] }, 'a second ensure changes nothing');
  });

  s.check('marked-only', `only the mesh's marked rules are ever added or removed`, async (t) => {
    const b = await s.fresh();
    const found = await b.foundRules();
    await b.driver.ensure([o], []);
    t.same(await b.foundRules(), found, 'their rules unchanged with the opening in');
    t.same(await b.driver.ensure([], []), { added: [], removed: [o.id] });
    t.same(await b.foundRules(), found, 'their rules unchanged after it went');
    t.same(await b.driver.openings(), []);
    t.notOk(await b.lab.reaches('client', MESH_PORT), 'the port is closed again');
    t.ok(await b.lab.reaches('outside', FOUND_PORT), 'their port still open');
  });

  s.check('reload', `after the found firewall's own reload, the next ensure mends the opening`, async (t) => {
    const b = await s.fresh();
    await b.driver.ensure([o], []);
    await b.reload();
    await b.driver.ensure([o], []);
    t.same(await b.driver.openings(), [o]);
    t.ok(await b.lab.reaches('client', MESH_PORT), 'reachable again');
    t.notOk(await b.lab.reaches('outside', MESH_PORT), 'still not from outside');
  });
}

/** The reach walk against what packets find. */
function reachChecks(s: Suite): void {
  const o = KIT_OPENING;
  s.check('reach', `the reach walk says what packets find`, async (t) => {
    const b = await s.fresh();
    if (!b.driver.reachability) {
      t.fail('the driver has no reachability(): the converge preview would say "unknown" for every door');
      return;
    }
    const door = { port: MESH_PORT, protocol: 'tcp' as const, path: 'incoming' as const };
    const [before] = await b.driver.reachability([door]);
    t.equal(before?.now, 'closed', `closed before the opening (${JSON.stringify(before)})`);
    await b.driver.ensure([o], []);
    const [after] = await b.driver.reachability([door]);
    t.equal(after?.now, 'open-from', `open from a range after it (${JSON.stringify(after)})`);
    t.same(after?.from, [ADDRESSES.privateRange]);
    const [theirs] = await b.driver.reachability([{ ...door, port: FOUND_PORT }]);
    t.equal(theirs?.now, 'open', `their own port is open from anywhere (${JSON.stringify(theirs)})`);
    t.ok(theirs?.mentioned, 'and a rule of theirs names it');
  });
}

/** Retiring the found firewall and the derived filter that takes its place. */
function retirementChecks(s: Suite): void {
  const o = KIT_OPENING;
  s.check('retire', `retire disables the found firewall keeping its configuration; re-enable brings it back as it was`, async (t) => {
    const b = await s.fresh();
    const found = await b.foundRules();
    const state = await b.driver.retire();
    t.ok(await b.lab.reaches('outside', MESH_PORT), 'retired: nothing filters');
    await b.driver.reenable(state);
    t.same(await b.foundRules(), found, 'their rules are back as they were');
    t.notOk(await b.lab.reaches('outside', MESH_PORT), `${MESH_PORT} denied again`);
    t.ok(await b.lab.reaches('outside', FOUND_PORT), `${FOUND_PORT} allowed again`);
  });

  s.check('derived', `the derived filter lets the openings in from their range and drops the rest`, async (t) => {
    const b = await s.fresh();
    const state = await b.driver.retire();
    await b.driver.loadDerived({ openings: [o], refusals: [], privateRange: ADDRESSES.privateRange });
    t.ok(await b.lab.reaches('client', MESH_PORT), 'the opening from its range');
    t.notOk(await b.lab.reaches('outside', MESH_PORT), 'not from outside');
    t.notOk(await b.lab.reaches('outside', FOUND_PORT), 'a port no opening declares is closed');
    await b.driver.unloadDerived();
    await b.driver.reenable(state);
    t.ok(await b.lab.reaches('outside', FOUND_PORT), 'unloaded and re-enabled: their firewall again');
  });
}

/** Runs every check of the suite as a subtest of `t`. */
export function firewallConformance(t: KitTest, spec: FirewallKitSpec): void {
  const why = labUnavailable();
  if (why) {
    t.fail(`the firewall kit cannot run: ${why}`);
    return;
  }
  const s = suite(t, spec);
  detectionChecks(s);
  openingChecks(s);
  reachChecks(s);
  retirementChecks(s);
}
