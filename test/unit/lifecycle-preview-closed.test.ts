/**
 * Issue 33 item 11: a port the found firewall already closes is not counted among those the flip
 * "closes"; the step says it stays closed, and the table shows "stays closed", not "WILL CLOSE".
 */
import t from 'tap';
import type { Declaration, FirewallDescription, Reach } from '@meshp/core';
import { buildPreview } from '@meshp/core/lifecycle';
import { renderPreview } from '../../bin/src/host/converge.js';

const fw: FirewallDescription = {
  kind: 'nftables',
  manager: 'nftables.service',
  active: true,
  tables: ['inet filter'],
  configFile: '/etc/nftables.conf',
  summary: [],
};
const decl: Declaration = { apiVersion: 'meshp/v1', node: 'n1', mode: 'adopted', settings: { ports: {} }, modules: [] };
const sock = (port: number) => ({ protocol: 'tcp' as const, address: '0.0.0.0', port, family: 4 as const, process: `p${port}`, pid: port });
const reach = (port: number, now: Reach['now']): Reach => ({ port, protocol: 'tcp', path: 'incoming', now, mentioned: now === 'closed' });

t.test('a port already closed is not one the flip closes', async (t) => {
  const p = buildPreview({
    declaration: decl,
    firewall: fw,
    published: [],
    listening: [sock(9000), sock(9001)],
    reach: [reach(9000, 'open'), reach(9001, 'closed')],
  });
  const load = p.steps.find((s) => s.startsWith("load the mesh's derived filter"))!;
  t.match(load, /, 1 reachable port close, 1 already closed stays closed$/, 'one closes, the closed one is said apart');
  const rows = renderPreview(p).split('\n');
  t.match(
    rows.find((r) => r.startsWith('9000/tcp')),
    /open \(no rule mentions it\)\s+WILL CLOSE$/,
  );
  t.match(
    rows.find((r) => r.startsWith('9001/tcp')),
    /closed\s+stays closed$/,
  );
});

t.test('with nothing closed already the step is as before', async (t) => {
  const p = buildPreview({ declaration: decl, firewall: fw, published: [], listening: [sock(9000)], reach: [reach(9000, 'open')] });
  t.match(p.steps.join('\n'), /0 openings allowed, 1 reachable port close\n/);
});
