/**
 * Issue 26: a via node's forwarding as its agent reports it (found, held, owned) crosses the wire
 * intact, and a route change's preview says, per via node, what happens to it: turned on (converged,
 * recorded first), held (adopted, never changed), kept (found on), put back (stops serving), or not
 * known (no report).
 */
import t from 'tap';
import type { Declaration, ForwardingReport, ReportMessage } from '@meshp/core';
import { buildPreview } from '@meshp/core/lifecycle';
import { factsOfReport } from '../../plugins/controller/src/converge.js';
import { SyncRequest } from '@meshp/protocol';
import { agentFromWire, agentToWire } from '../../plugins/transport-grpc/src/codec.js';
import { forwardingChanges } from '../../plugins/controller/src/hosting/route-forwarding.js';

const V4 = 'net.ipv4.ip_forward';
const V6 = 'net.ipv6.conf.all.forwarding';

function report(mode: ReportMessage['mode'], forwarding?: ForwardingReport): ReportMessage {
  return {
    appliedVersion: 3,
    mode,
    firewallKind: 'nftables',
    firewallActive: true,
    resources: [],
    at: '2026-12-03T00:00:00Z',
    ...(forwarding ? { forwarding } : {}),
  };
}

t.test('a router forwarding crosses the wire as reported; an unknown state is left out, not guessed', async (t) => {
  const f: ForwardingReport = {
    state: 'owned',
    values: { [V4]: '1', [V6]: '0' },
    original: { [V4]: '0' },
    reason: 'turned on: net.ipv4.ip_forward',
    needed: [V4],
  };
  const back = agentFromWire(SyncRequest.decode(SyncRequest.encode(agentToWire({ report: report('converged', f) })).finish()));
  t.same('report' in back && back.report.forwarding, f);
  const none = agentFromWire(SyncRequest.decode(SyncRequest.encode(agentToWire({ report: report('adopted') })).finish()));
  t.equal('report' in none && none.report.forwarding, undefined, 'an older agent: absent');
  const wire = agentToWire({ report: report('adopted', { ...f, state: 'owned' }) });
  wire.report!.forwarding!.state = 'later';
  const later = agentFromWire(SyncRequest.decode(SyncRequest.encode(wire).finish()));
  t.equal('report' in later && later.report.forwarding, undefined);
});

t.test("a route change's preview says what happens to each via node's forwarding", async (t) => {
  const reports = new Map<string, ReportMessage>([
    ['conv', report('converged', { state: 'none', values: { [V4]: '0', [V6]: '0' }, original: {}, reason: 'not a router', needed: [] })],
    ['adop', report('adopted', { state: 'none', values: { [V4]: '0', [V6]: '' }, original: {}, reason: 'not a router', needed: [] })],
    ['on', report('adopted', { state: 'none', values: { [V4]: '1', [V6]: '0' }, original: {}, reason: 'not a router', needed: [] })],
    ['owned', report('converged', { state: 'owned', values: { [V4]: '1', [V6]: '0' }, original: { [V4]: '0' }, reason: 'turned on', needed: [V4] })],
  ]);
  const of = (n: string) => reports.get(n) ?? null;
  const lan = { name: 'lan', prefixes: ['192.168.77.0/24'], viaPeers: ['conv', 'adop', 'on', 'old'], noMasquerade: false };
  const set = new Map(forwardingChanges(null, lan, of).map((c) => [c.node, c.change]));
  t.match(set.get('conv'), /^net\.ipv4\.ip_forward=0 found: recorded, then turned on \(converged\)$/);
  t.match(
    set.get('adop'),
    /^net\.ipv4\.ip_forward=0 on an adopted node: held, never changed; it forwards nothing until it is turned on or the node converges$/,
  );
  t.match(set.get('on'), /^net\.ipv4\.ip_forward=1 found on: kept$/);
  t.match(set.get('old'), /forwarding not reported/);

  // Unchanged via nodes of the same family are not said again; a v6 prefix added is.
  t.same(forwardingChanges(lan, { ...lan, prefixes: ['192.168.78.0/24'] }, of), []);
  const v6 = forwardingChanges({ ...lan, viaPeers: ['conv'] }, { ...lan, prefixes: ['192.168.77.0/24', 'fd77::/64'], viaPeers: ['conv'] }, of);
  t.same(v6, [
    {
      node: 'conv',
      change: 'net.ipv4.ip_forward=0 found: recorded, then turned on (converged); net.ipv6.conf.all.forwarding=0 found: recorded, then turned on (converged)',
    },
  ]);

  // No member has an IPv6 mesh address: no peer can send IPv6 through the tunnel, IPv6 forwarding is not needed (the agent's rule too).
  const v4only = forwardingChanges(null, { ...lan, prefixes: ['0.0.0.0/0', '::/0'], viaPeers: ['conv'] }, of, false);
  t.same(v4only, [{ node: 'conv', change: 'net.ipv4.ip_forward=0 found: recorded, then turned on (converged)' }], 'an exit on an IPv4 mesh: ip_forward only');
  t.same(
    forwardingChanges({ ...lan, viaPeers: ['conv'] }, { ...lan, prefixes: ['192.168.77.0/24', 'fd77::/64'], viaPeers: ['conv'] }, of, false),
    [],
    'a v6 prefix added on an IPv4 mesh changes no forwarding',
  );

  // Leaving the group: what meshp turned on is put back; a found setting is left.
  const removed = new Map(forwardingChanges({ ...lan, viaPeers: ['owned', 'on'] }, null, of).map((c) => [c.node, c.change]));
  t.match(removed.get('owned'), /^stops serving: net\.ipv4\.ip_forward put back to 0 as found/);
  t.match(removed.get('on'), /^stops serving: its forwarding left as found$/);
});

t.test(
  "the converge preview of an adopted router whose forwarding is held off says the flip turns it on; the id is the machine's, not the setting's",
  async (t) => {
    const declaration: Declaration = { apiVersion: 'meshp/v1', node: 'r1', mode: 'adopted', settings: { ports: {} }, modules: [] };
    const held = report('adopted', { state: 'held', values: { [V4]: '0', [V6]: '0' }, original: {}, reason: 'held', needed: [V4] });
    const on = report('adopted', { state: 'found-on', values: { [V4]: '1', [V6]: '0' }, original: {}, reason: 'found', needed: [V4] });
    const a = buildPreview({ declaration, ...factsOfReport(held) });
    const b = buildPreview({ declaration, ...factsOfReport(on) });
    t.match(
      a.steps.at(-1),
      /^turn on net\.ipv4\.ip_forward for the route groups this router serves \(found 0: recorded first, put back on the return to adopted/,
    );
    t.notMatch(b.steps.join('\n'), /ip_forward/, 'found on: nothing to turn on');
    t.notMatch(buildPreview({ declaration, ...factsOfReport(report('adopted')) }).steps.join('\n'), /ip_forward/, 'no router: nothing said');
    t.equal(a.id, b.id, 'the same id: the agent computes it without the setting');
    // An agent with a firewall plugin lists the change among its plugin changes: one step, not two.
    const change = {
      key: 'file:/proc/sys/net/ipv4/ip_forward',
      kind: 'file',
      module: 'routing',
      by: 'tunnel-wireguard',
      op: 'converge',
      reason: 'found 0',
      digest: 'x',
    };
    const c = buildPreview({ declaration, ...factsOfReport({ ...held, pluginChanges: [change] }) });
    t.equal(c.steps.filter((s) => /ip_forward/.test(s)).length, 1, 'reported as a plugin change too: said once');
  },
);
