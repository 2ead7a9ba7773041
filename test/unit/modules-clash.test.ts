/**
 * Two modules of one node that claim one resource are refused by the controller (issue 11): the
 * assign, or the redefinition that would make the pair, is MESHP_MODULES_CLASH naming both modules
 * and the resource, and nothing is stored (the version, the assignments and the module stay).
 * The agent's own check (validateDeclaration) refuses the same pairs.
 */
import t from 'tap';
import { Controller, MemoryStore } from '@meshp/controller';
import type { ModuleDecl } from '@meshp/core';
import { validateDeclaration } from '@meshp/core/reconcile';
import { findClash } from '@meshp/core/schema';

const NET = 'n';
type Mod = Omit<ModuleDecl, 'taken'>;

function bed(...mods: Mod[]): Controller {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.join(NET, { id: 'm1', nodeKey: 'k', mode: 'adopted' });
  c.join(NET, { id: 'm2', nodeKey: 'k2', mode: 'adopted' });
  for (const m of mods) c.defineModule(NET, m);
  return c;
}

const cases: [string, Mod, Mod, RegExp][] = [
  [
    'a file',
    { name: 'a', files: [{ path: '/etc/x.conf', content: 'a' }] },
    { name: 'b', files: [{ path: '/etc/x.conf', content: 'b' }] },
    /file:\/etc\/x\.conf is declared by both module a and module b/,
  ],
  [
    'a container name',
    { name: 'a', containers: [{ name: 'web', image: 'nginx' }] },
    { name: 'b', containers: [{ name: 'web', image: 'httpd' }] },
    /container:web .*module a and module b/,
  ],
  [
    'a published host port',
    { name: 'a', containers: [{ name: 'w1', image: 'nginx', ports: [{ container: 80, host: 8080 }] }] },
    { name: 'b', containers: [{ name: 'w2', image: 'nginx', ports: [{ container: 81, host: 8080, protocol: 'tcp' }] }] },
    /port:tcp\/8080 .*module a and module b/,
  ],
  [
    'an opening id',
    { name: 'a', openings: [{ id: 'web', port: 80, path: 'incoming' }] },
    { name: 'b', openings: [{ id: 'web', port: 81, path: 'incoming' }] },
    /opening:web .*module a and module b/,
  ],
];

for (const [what, a, b, message] of cases) {
  t.test(`two modules declaring ${what} on one node: the assign is refused, nothing stored`, async (t) => {
    const c = bed(a, b);
    c.assignModule(NET, 'm1', 'a');
    c.assignModule(NET, 'm2', 'b');
    const version = c.listNodes(NET)[0]!.stateVersion;
    t.throws(() => c.assignModule(NET, 'm1', 'b'), { code: 'MESHP_MODULES_CLASH', message });
    const m1 = c.listNodes(NET).find((n) => n.name === 'm1')!;
    t.same(m1.assignedModules, ['a'], 'the assignment was not stored');
    t.equal(m1.stateVersion, version, 'no new version');
    t.throws(
      () =>
        validateDeclaration({
          apiVersion: 'meshp/v1',
          node: 'm1',
          mode: 'adopted',
          modules: [
            { ...a, taken: false },
            { ...b, taken: false },
          ],
        }),
      { code: 'MESHP_DECLARATION_INVALID', message },
      "the agent's check refuses the same pair",
    );
  });
}

t.test('a module redefined so that it clashes with another on a node that has both: refused, the old definition stays', async (t) => {
  const c = bed({ name: 'a', files: [{ path: '/etc/a.conf', content: 'a' }] }, { name: 'b', files: [{ path: '/etc/b.conf', content: 'b' }] });
  c.assignModule(NET, 'm1', 'a');
  c.assignModule(NET, 'm1', 'b');
  const version = c.listNodes(NET)[0]!.stateVersion;
  t.throws(() => c.defineModule(NET, { name: 'b', files: [{ path: '/etc/a.conf', content: 'b' }] }), {
    code: 'MESHP_MODULES_CLASH',
    message: /node m1: file:\/etc\/a\.conf/,
  });
  t.equal(c.listNodes(NET)[0]!.stateVersion, version, 'nothing stored');
  t.match(c.declarationOf(NET, 'm1').modules.find((m) => m.name === 'b')?.files, [{ path: '/etc/b.conf' }], 'the old definition stays');
  // Where no node has both, the same definition is fine.
  c.unassignModule(NET, 'm1', 'a');
  t.ok(c.defineModule(NET, { name: 'b', files: [{ path: '/etc/a.conf', content: 'b' }] }) > version);
});

t.test('no clash: distinct resources, and one port on two protocols', async (t) => {
  t.equal(
    findClash([
      { name: 'a', containers: [{ name: 'w1', image: 'i', ports: [{ container: 53, host: 53, protocol: 'udp' }] }] },
      { name: 'b', containers: [{ name: 'w2', image: 'i', ports: [{ container: 53, host: 53, protocol: 'tcp' }] }] },
    ]),
    null,
  );
  t.equal(
    findClash([
      { name: 'a', openings: [{ port: 80, path: 'incoming' }] },
      { name: 'b', openings: [{ port: 80, path: 'incoming' }] },
    ]),
    null,
    'two modules opening one port to their ranges: two openings, no clash',
  );
});
