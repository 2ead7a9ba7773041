/**
 * A converged declaration with no preview id (a converged enrolment) flips only a machine with nothing
 * to close (issue 33, items 6 and 11): a port its found firewall already closes is not one the flip
 * closes, and a machine in use is refused with the way that keeps it serving named first.
 */
import t from 'tap';
import { PLUGIN_API_VERSION, type Door, type FirewallDriver, type Listener, type Plugin } from '@meshp/core';
import { reconcileLifecycle } from '@meshp/core/agent';
import { declarationToWire } from '@meshp/core/delta';
import type { Subtest } from '../helpers/tap-types.js';
import { bed } from '../helpers/host.js';

function machine(t: Subtest, active: boolean, closed: number[]) {
  const driver: FirewallDriver = {
    kind: 'fake',
    describe: async () => ({ kind: 'fake', manager: 'test', active, tables: active ? ['inet filter'] : [], summary: [] }),
    openings: async () => [],
    ensure: async () => ({ added: [], removed: [] }),
    loadDerived: async () => {},
    unloadDerived: async () => {},
    retire: async () => ({}),
    reenable: async () => {},
    reachability: async (doors: Door[]) =>
      doors.map((d) => ({
        port: d.port,
        protocol: d.protocol,
        path: d.path,
        now: closed.includes(d.port) ? ('closed' as const) : ('open' as const),
        mentioned: closed.includes(d.port),
      })),
  };
  const listening: Listener[] = [{ protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4, process: 'db', pid: 7 }];
  const plugins: Plugin[] = [
    {
      name: 'fw',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) => h.hooks.firewall.tapPromise('fw', async (probe) => void probe.seen.push({ kind: 'fake', active, summary: 'fake', by: 'fw', driver })),
    },
    {
      name: 'facts',
      apiVersion: PLUGIN_API_VERSION,
      apply: (h) => h.hooks.facts.tapPromise('facts', async () => ({ listening: async () => listening, addresses: async () => [] })),
    },
  ];
  return bed(t).host(plugins);
}

const wire = declarationToWire({ apiVersion: 'meshp/v1', node: 'n1', mode: 'converged', settings: { ports: {} }, modules: [] });

t.test('a port the found rules already close does not stop an unasked flip: nothing reachable closes', async (t) => {
  const { lifecycle } = await reconcileLifecycle(machine(t, false, [9000]), wire);
  t.equal(lifecycle.state, 'converged');
});

t.test('a reachable port that would close refuses it', async (t) => {
  const { lifecycle } = await reconcileLifecycle(machine(t, false, []), wire);
  t.match(lifecycle, { state: 'refused', code: 'MESHP_MACHINE_IN_USE', message: /9000\/tcp \(db \(pid 7\)\) would close/ });
});

t.test('a machine in use is told first how to keep it serving: adopt, or a token made with --adopted', async (t) => {
  const { lifecycle } = await reconcileLifecycle(machine(t, true, []), wire);
  t.match(lifecycle, { state: 'refused', code: 'MESHP_MACHINE_IN_USE' });
  t.match(
    lifecycle.message,
    /nothing flipped\. To keep it serving as it is: meshp node adopt n1 --yes \(or enrol with a token made with --adopted\); to converge it: meshp node converge n1 --preview/,
  );
});
