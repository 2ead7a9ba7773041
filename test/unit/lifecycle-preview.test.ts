import t from 'tap';
import type { Declaration, FirewallDescription, Reach } from '@meshp/core';
import { buildPreview, previewDoors } from '@meshp/core/lifecycle';

const fw: FirewallDescription = {
  kind: 'nftables',
  manager: 'nftables.service',
  active: true,
  tables: ['inet filter'],
  configFile: '/etc/nftables.conf',
  summary: [],
};

const decl: Declaration = {
  apiVersion: 'meshp/v1',
  node: 'n1',
  mode: 'adopted',
  settings: { ports: {} },
  modules: [
    {
      name: 'web',
      taken: false,
      containers: [{ name: 'web', image: 'i', ports: [{ container: 80, host: 8080 }] }],
      openings: [{ port: 8080, path: 'forwarded', from: ['10.77.0.0/24'] }],
    },
    { name: 'ssh', taken: true, openings: [{ port: 22, path: 'incoming' }] },
  ],
};

t.test('the preview names every reachable port, who declares it, and what closes', async (t) => {
  const p = buildPreview({
    declaration: decl,
    firewall: fw,
    listening: [
      { protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4, process: 'sshd', pid: 10 },
      { protocol: 'tcp', address: '0.0.0.0', port: 8080, family: 4, process: 'docker-proxy', pid: 11 },
      { protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4, process: 'legacy', pid: 12 },
      { protocol: 'tcp', address: '127.0.0.1', port: 5000, family: 4, process: 'local', pid: 13 },
    ],
    published: [
      { container: 'web', containerPort: 80, hostPort: 8080, hostIp: '0.0.0.0', protocol: 'tcp' },
      { container: 'stray', containerPort: 80, hostPort: 18081, hostIp: '0.0.0.0', protocol: 'tcp' },
    ],
  });
  const byPort = Object.fromEntries(p.items.map((i) => [i.port, i]));
  t.match(byPort[22], { source: 'socket', declaredBy: 'ssh', after: 'open' });
  t.match(byPort[8080], { source: 'published', declaredBy: 'web', after: 'open', from: ['10.77.0.0/24'] });
  t.equal(p.items.filter((i) => i.port === 8080).length, 1, 'the proxy socket of a published port is the same door');
  t.match(byPort[9000], { source: 'socket', declaredBy: null, after: 'closes', holder: 'legacy (pid 12)' });
  t.match(byPort[18081], { source: 'published', declaredBy: null, after: 'closes', holder: 'container stray' });
  t.match(byPort[5000], { after: 'local' });
  t.same(p.take, ['web']);
  t.match(p.steps.join('\n'), /retire the found nftables firewall .*\/etc\/nftables\.conf\) stays on disk/);
});

t.test('the preview id changes when the machine does, and only then', async (t) => {
  const base = { declaration: decl, firewall: fw, published: [], listening: [{ protocol: 'tcp' as const, address: '0.0.0.0', port: 22, family: 4 as const }] };
  const a = buildPreview(base);
  t.equal(buildPreview(base).id, a.id);
  const more = buildPreview({ ...base, listening: [...base.listening, { protocol: 'tcp' as const, address: '0.0.0.0', port: 9000, family: 4 as const }] });
  t.not(more.id, a.id, 'a new listener makes the old preview stale');
});

t.test('the preview id does not change when only the pid holding a port does', async (t) => {
  const at = (pid: number) =>
    buildPreview({
      declaration: decl,
      firewall: fw,
      published: [],
      listening: [{ protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4, process: 'httpd', pid }],
    });
  t.equal(at(100).id, at(4242).id, 'a forked or restarted server is the same door');
  t.match(at(4242).items[0], { holder: 'httpd (pid 4242)' }, 'the pid is still shown');
});

t.test('the preview asks the firewall about each door once: published ports forwarded, sockets incoming, loopback never', async (t) => {
  const doors = previewDoors(
    [
      { protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4 },
      { protocol: 'tcp', address: '::', port: 22, family: 6 },
      { protocol: 'tcp', address: '127.0.0.1', port: 5000, family: 4 },
    ],
    [
      { container: 'stray', containerPort: 80, hostPort: 18081, hostIp: '0.0.0.0', protocol: 'tcp' },
      { container: 'stray', containerPort: 80, hostPort: 18081, hostIp: '::', protocol: 'tcp' },
      { container: 'db', containerPort: 5432, hostPort: 5432, hostIp: '127.0.0.1', protocol: 'tcp' },
    ],
  );
  t.same(doors, [
    { port: 18081, protocol: 'tcp', path: 'forwarded', targetPort: 80 },
    { port: 22, protocol: 'tcp', path: 'incoming' },
  ]);
});

t.test('each item says where it is reachable from now: open, from ranges, closed, local, or unknown without an answer', async (t) => {
  const reach: Reach[] = [
    { port: 22, protocol: 'tcp', path: 'incoming', now: 'open-from', from: ['10.0.0.0/8'], mentioned: true },
    { port: 9000, protocol: 'tcp', path: 'incoming', now: 'closed', mentioned: false },
    { port: 18081, protocol: 'tcp', path: 'forwarded', now: 'open', mentioned: false },
    { port: 8080, protocol: 'tcp', path: 'incoming', now: 'closed', mentioned: false },
  ];
  const p = buildPreview({
    declaration: decl,
    firewall: fw,
    reach,
    listening: [
      { protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4 },
      { protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4 },
      { protocol: 'tcp', address: '0.0.0.0', port: 9100, family: 4 },
      { protocol: 'tcp', address: '127.0.0.1', port: 5000, family: 4 },
    ],
    published: [
      { container: 'stray', containerPort: 80, hostPort: 18081, hostIp: '0.0.0.0', protocol: 'tcp' },
      { container: 'web', containerPort: 80, hostPort: 8080, hostIp: '0.0.0.0', protocol: 'tcp' },
    ],
  });
  const by = Object.fromEntries(p.items.map((i) => [i.port, i]));
  t.match(by[22], { now: 'open-from', nowFrom: ['10.0.0.0/8'], mentioned: true, after: 'open' });
  t.match(by[9000], { now: 'closed', mentioned: false, after: 'closes' });
  t.match(by[18081], { now: 'open', mentioned: false, after: 'closes' }, 'a published port no rule mentions is named, open now, closing');
  t.match(by[8080], { source: 'published', now: 'unknown' }, 'a published port is asked about on the forwarded path, not the incoming one');
  t.match(by[9100], { now: 'unknown' }, 'no answer for the door');
  t.notOk('mentioned' in by[9100]!);
  t.match(by[5000], { now: 'local' });
  const none = buildPreview({ declaration: decl, firewall: fw, published: [], listening: [{ protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4 }] });
  t.match(none.items[0], { now: 'unknown' }, 'a report without reach (an older agent) gives unknown');
});

t.test('the preview id changes when the firewall does: where a door is reachable from now is part of it', async (t) => {
  const base = {
    declaration: decl,
    firewall: fw,
    published: [],
    listening: [{ protocol: 'tcp' as const, address: '0.0.0.0', port: 9000, family: 4 as const }],
  };
  const at = (now: Reach['now'], mentioned = true) => buildPreview({ ...base, reach: [{ port: 9000, protocol: 'tcp', path: 'incoming', now, mentioned }] }).id;
  t.equal(at('open'), at('open'));
  t.not(at('open'), at('closed'), 'a port closed since the preview makes it stale');
  t.not(at('open'), at('open', false));
  t.not(at('open'), buildPreview(base).id, 'an unknown reach is not an open one');
});
