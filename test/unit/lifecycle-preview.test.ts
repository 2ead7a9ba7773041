import t from 'tap';
import { buildPreview, type Declaration, type FirewallDescription } from '@meshp/core';

const fw: FirewallDescription = { kind: 'nftables', manager: 'nftables.service', active: true, tables: ['inet filter'], configFile: '/etc/nftables.conf', summary: [] };

const decl: Declaration = {
  apiVersion: 'meshp/v1', node: 'n1', mode: 'adopted', settings: { ports: {} },
  modules: [
    { name: 'web', taken: false, containers: [{ name: 'web', image: 'i', ports: [{ container: 80, host: 8080 }] }],
      openings: [{ port: 8080, path: 'forwarded', from: ['10.77.0.0/24'] }] },
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
    buildPreview({ declaration: decl, firewall: fw, published: [], listening: [{ protocol: 'tcp', address: '0.0.0.0', port: 9000, family: 4, process: 'httpd', pid }] });
  t.equal(at(100).id, at(4242).id, 'a forked or restarted server is the same door');
  t.match(at(4242).items[0], { holder: 'httpd (pid 4242)' }, 'the pid is still shown');
});
