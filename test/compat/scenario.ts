/**
 * One recorded scenario: the deltas a node receives while its network changes in every way the
 * protocol knows (joins, leaves, key rotations, policy moving scope both ways, inbound-only peers,
 * components, modules taken on an adopted node, a snapshot after log truncation, a several-part delta).
 */
import type { StateDelta } from '@meshp/core';
import { splitDelta } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';

export function recordScenario(onDelta: (d: StateDelta) => { appliedVersion: number; stateHash: string } | null): void {
  const c = new Controller(new MemoryStore(), { logDepth: 4, now: () => '2026-01-01T00:00:00.000Z' });
  c.createNetwork('lab');
  c.setPolicy('lab', [
    { from: 'ops', to: 'web' },
    { from: 'web', to: 'db', ports: ['5432/tcp'] },
  ]);
  c.join('lab', { id: 'me', nodeKey: 'k-me', tags: ['web'], mode: 'adopted', endpoints: ['192.0.2.1:51820'] });
  for (let i = 0; i < 12; i++) c.join('lab', { id: `db${i}`, nodeKey: `k-db${i}`, tags: ['db'] });
  c.join('lab', { id: 'laptop', nodeKey: 'k-laptop', tags: ['ops'] });
  c.join('lab', { id: 'other', nodeKey: 'k-other', tags: ['misc'] });
  const step = (): void => {
    const d = c.deltaFor('lab', 'me');
    if (!d) return;
    let ack: { appliedVersion: number; stateHash: string } | null = null;
    for (const part of d.fromVersion === 0 ? splitDelta(d, 5) : [d]) ack = onDelta(part) ?? ack;
    if (ack) c.ack('lab', 'me', ack.appliedVersion, ack.stateHash);
  };
  step();
  c.rotateKey('lab', 'db3', 'k-db3-2');
  step();
  c.leave('lab', 'db4');
  c.setComponent('lab', 'dns', {
    nameservers: ['100.96.0.53'],
    searchDomains: ['lab.mesh'],
    records: [{ name: 'db0.lab.mesh', addresses: ['100.96.0.2'], cname: '' }],
    domain: '',
    splits: [],
  });
  step();
  c.defineModule('lab', {
    name: 'web',
    files: [{ path: '/etc/web/web.conf', content: 'listen 8080\n', mode: '0644' }],
    containers: [{ name: 'web', image: 'lab/busybox:1', command: ['httpd', '-f', '-p', '80'], ports: [{ container: 80, host: 8080, protocol: 'tcp' }] }],
    openings: [{ port: 8080, protocol: 'tcp', from: ['10.77.0.0/24'], path: 'forwarded' }],
  });
  c.assignModule('lab', 'me', 'web');
  step();
  c.takeModule('lab', 'me', 'web');
  c.setPolicy('lab', [
    { from: 'ops', to: 'web' },
    { from: 'web', to: 'misc' },
  ]);
  step();
  c.setComponent('lab', 'dns', { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] });
  c.setPolicy('lab', [
    { from: 'ops', to: 'web' },
    { from: 'web', to: 'db', ports: ['5432/tcp'] },
    { from: 'web', to: 'misc' },
  ]);
  step();
  for (let i = 0; i < 6; i++) c.rotateKey('lab', 'laptop', `k-laptop-${i}`);
  step();
  c.setMode('lab', 'me', 'converged');
  c.setComponent('lab', 'relays', {
    relays: [{ id: 'r1', address: '198.51.100.7', port: 3478, region: 'eu', transport: 'udp', secretName: 'turn' }],
    secrets: { turn: 'scenario-secret' },
    mintedAt: 1_900_000_000,
  });
  step();
}
