import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { MeshpError, PLUGIN_API_VERSION, RETIRED_KEY, type FirewallDriver, type Opening, type Plugin } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration, stateOf } from '../helpers/host.js';

/** A firewall with no outside world: it remembers what it was asked. Core is tested without root. */
function recordingFirewall(active = true) {
  const calls: { op: string; openings?: Opening[]; refusals?: Opening[] }[] = [];
  let present: Opening[] = [];
  const driver: FirewallDriver = {
    kind: 'recording',
    async describe() { return { kind: 'recording', manager: 'test', active, tables: [], summary: [] }; },
    async openings() { return present; },
    async ensure(openings, refusals) { calls.push({ op: 'ensure', openings, refusals }); present = [...openings, ...refusals]; return { added: [], removed: [] }; },
    async loadDerived(f) { calls.push({ op: 'loadDerived', openings: f.openings, refusals: f.refusals }); },
    async unloadDerived() {},
    async retire() { return {}; },
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
  t.same(fw2.calls[0]?.openings?.map((o) => o.port), [8080]);
});

t.test('the foundation ports get openings from the private range and refusals from anywhere else', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall();
  const store = { name: 'store', taken: false, openings: [{ port: 15432, path: 'forwarded' as const, from: ['10.77.0.0/24'] }] };
  await b.apply(declaration('adopted', [store], { ports: { store: 15432 }, privateRange: '10.77.0.0/24' }), { extra: [fw.plugin] });
  const call = fw.calls[0]!;
  t.same(call.openings?.map((o) => [o.port, o.action, o.from]), [[15432, 'accept', ['10.77.0.0/24']]]);
  t.same(call.refusals?.map((o) => [o.port, o.action, o.except]), [[15432, 'drop', ['10.77.0.0/24']]]);
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
  await s.setValue(RETIRED_KEY, { tables: ['inet filter'] });
  await s.close();
  const fw = recordingFirewall(false);
  await b.apply(declaration('converged', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  t.same(fw.calls.map((c) => c.op), ['loadDerived']);
});

t.test('a converged node whose found firewall is still in force only gets openings: nothing closes implicitly', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall(true);
  await b.apply(declaration('converged', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  t.same(fw.calls.map((c) => c.op), ['ensure']);
});

t.test('a marked opening no longer declared is removed on the next reconcile', async (t) => {
  const b = bed(t);
  const fw = recordingFirewall();
  await b.apply(declaration('adopted', [{ name: 'svc', taken: true, openings: [WEB_OPENING] }]), { extra: [fw.plugin] });
  // The same firewall, still holding the mesh's opening: the module is unassigned.
  const again = { ...fw.plugin, name: 'recording-firewall' };
  await b.apply(declaration('adopted', []), { extra: [again] });
  t.same(fw.calls.map((c) => [c.op, c.openings?.length]), [['ensure', 1], ['ensure', 0]]);
});

t.test("a converged node's derived filter is loaded on every reconcile, even with nothing to open (a reboot loses it)", async (t) => {
  const b = bed(t);
  const s = new SqliteHostStore(b.stateDir);
  await s.setValue(RETIRED_KEY, { kind: 'recording', state: {} });
  await s.close();
  const fw = recordingFirewall(false);
  await b.apply(declaration('converged', []), { extra: [fw.plugin] });
  t.same(fw.calls.map((c) => [c.op, c.openings?.length]), [['loadDerived', 0]]);
});

t.test('a firewall that refuses the openings is reported: the openings refused, the reason in the facts', async (t) => {
  const b = bed(t);
  const failing: Plugin = {
    name: 'failing-firewall',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.firewall.tapPromise('failing-firewall', async (probe) => {
        probe.seen.push({
          kind: 'failing', active: true, summary: 'test', by: 'failing-firewall',
          driver: {
            kind: 'failing',
            async describe() { return { kind: 'failing', manager: 'test', active: true, tables: [], summary: [] }; },
            async openings() { return []; },
            async ensure() { throw new MeshpError('MESHP_FIREWALL_FAILED', 'nft: Could not process rule'); },
            async loadDerived() {},
            async unloadDerived() {},
            async retire() { return {}; },
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
