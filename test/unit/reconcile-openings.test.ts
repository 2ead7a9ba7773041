import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError, PLUGIN_API_VERSION, type Door, type FirewallDriver, type Opening, type Plugin, type Reach } from '@meshp/core';
import { RETIRED_KEY } from '@meshp/core/reconcile';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

/** A firewall with no outside world: it remembers what it was asked. Core is tested without root. */
function recordingFirewall(active = true, walk: 'open' | 'none' | ((d: Door) => Reach) = 'open') {
  const calls: { op: string; openings?: Opening[]; refusals?: Opening[] }[] = [];
  let present: Opening[] = [];
  // Its walk sees open what it was last asked to open (a stand-in for a driver's reach walk).
  const reachability = async (doors: Door[]): Promise<Reach[]> =>
    doors.map((d) => {
      if (typeof walk === 'function') return walk(d);
      const o = present.find((p) => p.port === d.port && p.path === d.path && p.action === 'accept');
      return {
        port: d.port,
        protocol: d.protocol,
        path: d.path,
        mentioned: false,
        ...(o ? (o.from.length ? { now: 'open-from' as const, from: o.from } : { now: 'open' as const }) : { now: 'closed' as const }),
      };
    });
  const driver: FirewallDriver = {
    ...(walk === 'none' ? {} : { reachability }),
    kind: 'recording',
    async describe() {
      return { kind: 'recording', manager: 'test', active, tables: [], summary: [] };
    },
    async openings() {
      return present;
    },
    async ensure(openings, refusals) {
      calls.push({ op: 'ensure', openings, refusals });
      present = [...openings, ...refusals];
      return { added: [], removed: [] };
    },
    async loadDerived(f) {
      calls.push({ op: 'loadDerived', openings: f.openings, refusals: f.refusals });
    },
    async unloadDerived() {},
    async retire() {
      return {};
    },
    async reenable() {},
  };
  const plugin: Plugin = {
    name: 'recording-firewall',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('recording-firewall', async (probe) => {
        probe.seen.push({ kind: 'recording', active, summary: 'test', by: 'recording-firewall', driver });
      });
    },
  };
  return { plugin, calls };
}

const WEB_OPENING = { port: 8080, protocol: 'tcp' as const, from: ['10.77.0.0/24'], path: 'forwarded' as const };

t.test('an opening of a module still holding found resources waits for the take', async (t) => {
  const b = bed(t);
  mkdirSync(join(b.root, 'etc/web'), { recursive: true });
  writeFileSync(join(b.root, 'etc/web/web.conf'), 'predecessor');
  const fw = recordingFirewall();
  const mod = (taken: boolean) => ({ name: 'web', taken, files: [{ path: '/etc/web/web.conf', content: 'mesh' }], openings: [WEB_OPENING] });
  const r = await b.apply(declaration('adopted', [mod(false)]), { extra: [fw.plugin] });
  t.equal(stateOf(r, 'opening:web/forwarded/tcp/8080'), 'pending');
  t.same(fw.calls, [], 'a firewall holding nothing of the mesh is not touched');
  const fw2 = recordingFirewall();
  const taken = await b.apply(declaration('adopted', [mod(true)]), { extra: [fw2.plugin] });
  t.equal(stateOf(taken, 'opening:web/forwarded/tcp/8080'), 'created');
  t.equal(fw2.calls[0]?.op, 'ensure');
  t.same(
    fw2.calls[0]?.openings?.map((o) => o.port),
    [8080],
  );
});

t.test('the foundation ports get openings from the private range and refusals from anywhere else', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall();
  const store = { name: 'store', taken: false, openings: [{ port: 15432, path: 'forwarded' as const, from: ['10.77.0.0/24'] }] };
  await b.apply(declaration('adopted', [store], { ports: { store: 15432 }, privateRange: '10.77.0.0/24' }), { extra: [fw.plugin] });
  const call = fw.calls[0]!;
  t.same(
    call.openings?.map((o) => [o.port, o.action, o.from]),
    [[15432, 'accept', ['10.77.0.0/24']]],
  );
  t.same(
    call.refusals?.map((o) => [o.port, o.action, o.except]),
    [[15432, 'drop', ['10.77.0.0/24']]],
  );
});

t.test('openings are re-ensured on every reconcile, so a reload is mended', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall();
  const mod = { name: 'svc', taken: true, openings: [WEB_OPENING] };
  await b.apply(declaration('adopted', [mod]), { extra: [fw.plugin] });
  const fw2 = recordingFirewall();
  const r = await b.apply(declaration('adopted', [mod]), { extra: [fw2.plugin] });
  t.equal(fw2.calls.length, 1, 'ensured again even though nothing was missing');
  t.equal(stateOf(r, 'opening:web/forwarded/tcp/8080'), undefined);
  t.equal(stateOf(r, 'opening:svc/forwarded/tcp/8080'), 'created', 'a fresh firewall had lost it');
});

t.test('openings are refused when no firewall plugin is loaded', async (t) => {
  const b = bed(t);
  const r = await b.apply(declaration('adopted', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]));
  t.equal(stateOf(r, 'opening:svc/forwarded/tcp/8080'), 'refused');
});

t.test('an active firewall no plugin speaks refuses the apply, and nothing is written', async (t) => {
  const b = bed(t);
  const unknown: Plugin = {
    name: 'sees-firewalld',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('sees-firewalld', async (probe) => {
        probe.seen.push({ kind: 'firewalld', active: true, summary: 'table inet firewalld', by: 'sees-firewalld' });
      });
    },
  };
  const decl = declaration('adopted', [{ name: 'svc', taken: false, files: [{ path: '/etc/svc.conf', content: 'x' }] }]);
  await t.rejects(b.apply(decl, { extra: [unknown] }), { code: 'MESHP_FIREWALL_UNKNOWN', message: /firewalld/ });
  const { existsSync } = await import('node:fs');
  t.notOk(existsSync(join(b.root, 'etc/svc.conf')));
});

t.test('a converged node whose found firewall was retired gets the derived filter, not openings in a found chain', async (t) => {
  const b = bed(t);
  const s = new SqliteHostStore(b.stateDir);
  assertPrivate(t, b.stateDir); // issue 13: the state folder 0700, its database 0600
  await s.setValue(RETIRED_KEY, { tables: ['inet filter'] });
  await s.close();
  const fw = recordingFirewall(false);
  await b.apply(declaration('converged', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  t.same(
    fw.calls.map((c) => c.op),
    ['loadDerived'],
  );
});

t.test('a converged node whose found firewall is still in force only gets openings: nothing closes implicitly', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall(true);
  await b.apply(declaration('converged', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  t.same(
    fw.calls.map((c) => c.op),
    ['ensure'],
  );
});

t.test('a marked opening no longer declared is removed on the next reconcile', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall();
  await b.apply(declaration('adopted', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  // The same firewall, still holding the mesh's opening: the module is unassigned.
  const again = { ...fw.plugin, name: 'recording-firewall' };
  await b.apply(declaration('adopted', []), { extra: [again] });
  t.same(
    fw.calls.map((c) => [c.op, c.openings?.length]),
    [
      ['ensure', 1],
      ['ensure', 0],
    ],
  );
});

t.test("a converged node's derived filter is loaded on every reconcile, even with nothing to open (a reboot loses it)", async (t) => {
  const b = bed(t);
  const s = new SqliteHostStore(b.stateDir);
  await s.setValue(RETIRED_KEY, { kind: 'recording', state: {} });
  await s.close();
  const fw = recordingFirewall(false);
  await b.apply(declaration('converged', []), { extra: [fw.plugin] });
  t.same(
    fw.calls.map((c) => [c.op, c.openings?.length]),
    [['loadDerived', 0]],
  );
});

t.test('a firewall that refuses the openings is reported: the openings refused, the reason in the facts', async (t) => {
  const b = bed(t);
  const failing: Plugin = {
    name: 'failing-firewall',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('failing-firewall', async (probe) => {
        probe.seen.push({
          kind: 'failing',
          active: true,
          summary: 'test',
          by: 'failing-firewall',
          driver: {
            kind: 'failing',
            async describe() {
              return { kind: 'failing', manager: 'test', active: true, tables: [], summary: [] };
            },
            async openings() {
              return [];
            },
            async ensure() {
              throw new MeshpError('MESHP_FIREWALL_FAILED', 'nft: Could not process rule');
            },
            async loadDerived() {},
            async unloadDerived() {},
            async retire() {
              return {};
            },
            async reenable() {},
          },
        });
      });
    },
  };
  const r = await b.apply(declaration('adopted', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [failing] });
  t.equal(stateOf(r, 'opening:svc/forwarded/tcp/8080'), 'refused');
  t.match(r.report.facts.firewallError, /MESHP_FIREWALL_FAILED.*Could not process rule/);
});

t.test('an opening is reported created only when the walk sees it open from its whole range', async (t) => {
  const mod = { name: 'svc', taken: true, openings: [WEB_OPENING] };
  const key = 'opening:svc/forwarded/tcp/8080';
  const reasonOf = (r: Awaited<ReturnType<ReturnType<typeof bed>['apply']>>) => r.report.resources.find((x) => x.key === key)?.reason ?? '';

  const shadowed = recordingFirewall(true, (d) => ({
    port: d.port,
    protocol: d.protocol,
    path: d.path,
    mentioned: false,
    now: 'open-from',
    from: ['10.77.0.0/25'],
    droppedBy: [{ rule: '-A FORWARD -s 10.77.0.128/25 -j DROP', from: ['10.77.0.128/25'] }],
    unread: [],
  }));
  const r1 = await bed(t).apply(declaration('adopted', [mod]), { extra: [shadowed.plugin] });
  t.equal(stateOf(r1, key), 'refused', 'open from half its range: refused');
  t.match(reasonOf(r1), /^MESHP_OPENING_INEFFECTIVE: .*shadowed by -A FORWARD -s 10\.77\.0\.128\/25 -j DROP/);

  const unread = recordingFirewall(true, (d) => ({
    port: d.port,
    protocol: d.protocol,
    path: d.path,
    mentioned: false,
    now: 'open',
    droppedBy: [],
    unread: [{ rule: '-A FORWARD -m recent --rcheck -j DROP', from: ['0.0.0.0/0'] }],
  }));
  const r2 = await bed(t).apply(declaration('adopted', [mod]), { extra: [unread.plugin] });
  t.equal(stateOf(r2, key), 'unverified');
  t.match(reasonOf(r2), /^MESHP_OPENING_UNVERIFIED: .*-m recent --rcheck/);
  t.equal(r2.report.counts.unverified, 1);

  const blind = recordingFirewall(true, 'none');
  t.equal(
    stateOf(await bed(t).apply(declaration('adopted', [mod]), { extra: [blind.plugin] }), key),
    'unverified',
    'a driver without a walk: unverified, not created',
  );

  const seen = recordingFirewall(true);
  t.equal(stateOf(await bed(t).apply(declaration('adopted', [mod]), { extra: [seen.plugin] }), key), 'created', 'seen open: created');
});

t.test("an opening the driver leaves no place for is refused with the driver's reason", async (t) => {
  const mod = { name: 'svc', taken: true, openings: [WEB_OPENING] };
  const reason = 'MESHP_OPENING_UNPLACEABLE: opening svc/forwarded/tcp/8080: no place';
  const plugin: Plugin = {
    name: 'refusing-firewall',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('refusing-firewall', async (probe) => {
        probe.seen.push({
          kind: 'refusing',
          active: true,
          summary: 'test',
          by: 'refusing-firewall',
          driver: {
            kind: 'refusing',
            async describe() {
              return { kind: 'refusing', manager: 'test', active: true, tables: [], summary: [] };
            },
            async openings() {
              return [];
            },
            async ensure(openings) {
              return { added: [], removed: [], refused: openings.map((o) => ({ id: o.id, reason })) };
            },
            async loadDerived() {},
            async unloadDerived() {},
            async retire() {
              return {};
            },
            async reenable() {},
            async reachability(doors) {
              return doors.map((d) => ({ ...d, now: 'open' as const, mentioned: false }));
            },
          },
        });
      });
    },
  };
  const r = await bed(t).apply(declaration('adopted', [mod]), { extra: [plugin] });
  t.equal(stateOf(r, 'opening:svc/forwarded/tcp/8080'), 'refused', 'refused even though the walk says open');
  t.equal(r.report.resources.find((x) => x.key === 'opening:svc/forwarded/tcp/8080')?.reason, reason);
});
