/** Sources by the interface their route back leaves by (core/src/net/interfaces.ts). */
import t from 'tap';
import { arrivalsOf, arrivingOn, interfacesOf, routesFromIpJson, toCidrs } from '@meshp/core/net';

const arrivals = arrivalsOf([
  { family: 4, dst: 'default', dev: 'ens3' },
  { family: 4, dst: '172.17.0.0/16', dev: 'docker0' },
  { family: 4, dst: '172.17.5.0/24', dev: 'br-5' },
  { family: 4, dst: '10.9.0.0/16' },
  { family: 6, dst: 'fd00::/8', dev: 'wg0' },
]);

t.test('the longest prefix claims its sources; a route without a device claims them for none', async (t) => {
  t.same(toCidrs(arrivingOn(arrivals, 'docker0', false)!), [
    '172.17.0.0/22',
    '172.17.4.0/24',
    '172.17.6.0/23',
    '172.17.8.0/21',
    '172.17.16.0/20',
    '172.17.32.0/19',
    '172.17.64.0/18',
    '172.17.128.0/17',
  ]);
  t.same(toCidrs(arrivingOn(arrivals, 'br-5', false)!), ['172.17.5.0/24']);
  const ens3 = arrivingOn(arrivals, 'ens3', false)!;
  t.notOk(
    toCidrs(ens3).some((c) => c.startsWith('172.17.') || c.startsWith('10.9.')),
    'the default route has what no longer route claims',
  );
  t.same(toCidrs(arrivingOn(arrivals, 'wg0', false)!), ['fd00::/8']);
});

t.test('a wildcard, a negation, a name no route leaves by', async (t) => {
  t.same(toCidrs(arrivingOn(arrivals, 'br-+', false)!), ['172.17.5.0/24']);
  const notWg = arrivingOn(arrivals, 'wg0', true)!;
  t.notOk(toCidrs(notWg).includes('fd00::/8'));
  t.equal(arrivingOn(arrivals, 'eth7', false), null);
  t.same(interfacesOf(arrivals, arrivingOn(arrivals, 'docker0', false)!), { names: ['docker0'], unrouted: false });
});

t.test('ip -j route output read as routes', async (t) => {
  t.same(
    routesFromIpJson(
      '[{"dst":"default","gateway":"10.0.0.1","dev":"ens3","flags":[]},{"dst":"10.0.0.0/24","dev":"ens3","protocol":"kernel"},{"type":"blackhole","dst":"10.9.0.0/16","flags":[]}]',
      4,
    ),
    [
      { family: 4, dst: 'default', dev: 'ens3' },
      { family: 4, dst: '10.0.0.0/24', dev: 'ens3' },
      { family: 4, dst: '10.9.0.0/16' },
    ],
  );
  t.equal(routesFromIpJson('not json', 4), null);
});
