/**
 * The controller's catalogue rules of issue 33, on the Controller alone (MemoryStore): a module is
 * removed only when no node has it assigned (MESHP_MODULE_ASSIGNED names the nodes), as one logged
 * change a restart keeps; and no change stores a declaration that could not be sent — an assign, a
 * take or a module redefined that names a setting a node lacks is refused MESHP_SETTING_MISSING with
 * the setting named, the state version unmoved. A node with the setting (the control-node, whose
 * settings genesis wrote) takes the same module.
 */
import t from 'tap';
import { Controller, MemoryStore, catalogueInfo } from '@meshp/controller';
import type { ModuleDef } from '@meshp/core/delta';

// As genesis defines it: the port is the node's setting (a string where the type says number).
const TUNNEL = {
  name: 'tunnel',
  files: [],
  containers: [],
  openings: [{ port: '{{ports.tunnel}}', protocol: 'udp', path: 'incoming', from: [] }],
} as unknown as ModuleDef;
const MOTD: ModuleDef = { name: 'motd', files: [{ path: '/etc/motd', content: 'hi\n' }] };

function controller(): { c: Controller; store: MemoryStore } {
  const store = new MemoryStore();
  const c = new Controller(store);
  c.createNetwork('n');
  c.join('n', { id: 'm1', nodeKey: 'k1', settings: { ports: { tunnel: 51820 }, privateRange: '100.96.0.0/16' } });
  c.join('n', { id: 'm2', nodeKey: 'k2' });
  c.join('n', { id: 'm3', nodeKey: 'k3' });
  c.defineModules('n', [TUNNEL, MOTD]);
  return { c, store };
}

t.test('assign and take refuse a module naming a setting the node lacks; nothing stored', async (t) => {
  const { c } = controller();
  c.assignModule('n', 'm1', 'tunnel');
  t.equal(c.declarationOf('n', 'm1').modules[0]!.openings[0]!.port, 51820, 'a node with the setting gets the module, filled');
  const v = c.stateVersion('n');
  t.throws(
    () => c.assignModule('n', 'm2', 'tunnel'),
    { code: 'MESHP_SETTING_MISSING', message: /module tunnel names \{\{ports\.tunnel\}\}, and node m2 has no setting ports\.tunnel \(its settings: none\)/ },
    'refused, naming the setting',
  );
  t.equal(c.stateVersion('n'), v, 'the state version did not move');
  t.same(c.member('n', 'm2')?.assigned, [], 'nothing assigned');

  // A state from before the check (assigned as it was accepted then): its take is refused the same way.
  c.updateMember('n', 'm2', { assigned: ['tunnel'] });
  const w = c.stateVersion('n');
  t.throws(() => c.takeModule('n', 'm2', 'tunnel'), { code: 'MESHP_SETTING_MISSING' }, 'the take of such an assignment is refused');
  t.equal(c.stateVersion('n'), w, 'nothing stored');
  c.takeModule('n', 'm1', 'tunnel');
  t.same(c.member('n', 'm1')?.taken, ['tunnel'], 'the node with the setting takes it');
  t.throws(
    () => c.updateMember('n', 'm1', { settings: { ports: {} } }),
    { code: 'MESHP_SETTING_MISSING' },
    'settings an assigned module names cannot be taken away',
  );
  t.equal(c.member('n', 'm1')?.settings.ports['tunnel'], 51820, 'they stay');
});

t.test('a module redefined to name a setting an assigned node lacks is refused; the old definition stays', async (t) => {
  const { c } = controller();
  c.assignModule('n', 'm2', 'motd');
  const v = c.stateVersion('n');
  const ranged: ModuleDef = { name: 'motd', files: MOTD.files!, openings: [{ port: 80, protocol: 'tcp', path: 'incoming', from: ['{{privateRange}}'] }] };
  t.throws(
    () => c.defineModules('n', [ranged]),
    { code: 'MESHP_SETTING_MISSING', message: /module motd names \{\{privateRange\}\}, and node m2 has no setting privateRange/ },
    'refused, naming the node and the setting',
  );
  t.equal(c.stateVersion('n'), v, 'the state version did not move');
  t.same(
    c.modules('n').find((m) => m.name === 'motd'),
    MOTD,
    'the old definition is kept',
  );
  c.unassignModule('n', 'm2', 'motd');
  c.assignModule('n', 'm1', 'motd');
  c.defineModules('n', [ranged]);
  t.same(
    c.declarationOf('n', 'm1').modules.find((m) => m.name === 'motd')?.openings[0]?.from,
    ['100.96.0.0/16'],
    'with only nodes that have the setting, it is redefined and filled',
  );
});

t.test('catalogue remove: refused while assigned, naming the nodes; one logged change a restart keeps', async (t) => {
  const { c, store } = controller();
  c.assignModule('n', 'm3', 'motd');
  c.assignModule('n', 'm2', 'motd');
  c.takeModule('n', 'm3', 'motd');
  t.same(
    catalogueInfo(c.modules('n'), c.members('n')).map((m) => [m.name, m.assignedTo, m.takenBy, m.settings]),
    [
      ['motd', ['m2', 'm3'], ['m3'], []],
      ['tunnel', [], [], ['ports.tunnel']],
    ],
    'each module with its nodes and the settings it names',
  );
  const v = c.stateVersion('n');
  t.throws(() => c.removeModule('n', 'motd'), { code: 'MESHP_MODULE_ASSIGNED', message: /module motd is assigned to m2, m3/ }, 'refused, naming the nodes');
  t.equal(c.stateVersion('n'), v, 'nothing changed');
  t.throws(() => c.removeModule('n', 'nope'), { code: 'MESHP_NOT_FOUND' }, 'a module that does not exist');
  const removed = c.removeModule('n', 'tunnel');
  t.equal(removed, v + 1, 'a removal is one change');
  t.same(
    c.modules('n').map((m) => m.name),
    ['motd'],
    'gone from the catalogue',
  );
  t.throws(() => c.assignModule('n', 'm1', 'tunnel'), { code: 'MESHP_NOT_FOUND' }, 'and cannot be assigned');
  const again = new Controller(MemoryStore.from(store.serialise()));
  t.same(
    again.modules('n').map((m) => m.name),
    ['motd'],
    'a restart keeps the removal',
  );
  t.equal(again.stateVersion('n'), removed, 'at its version');
});
