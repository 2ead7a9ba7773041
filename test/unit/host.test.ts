import t from 'tap';
import { PLUGIN_API_VERSION, MeshpError, type Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';

t.test('a plugin speaking another contract version is refused', async (t) => {
  const host = new Host();
  const old = { name: 'old', apiVersion: 0, apply() {} } as unknown as Plugin;
  t.throws(() => host.use(old), { code: 'MESHP_PLUGIN_INVALID' });
});

t.test('an active firewall no plugin answers for is refused, naming what was seen', async (t) => {
  const host = new Host();
  host.use({
    name: 'looker',
    apiVersion: PLUGIN_API_VERSION,
    apply(h) {
      h.hooks.firewall.tapPromise('looker', async (probe) => {
        probe.seen.push({ kind: 'firewalld', active: true, summary: 'table inet firewalld', by: 'looker' });
      });
    },
  });
  const err = await host.firewall().catch((e: unknown) => e);
  t.ok(err instanceof MeshpError);
  t.equal((err as MeshpError).code, 'MESHP_FIREWALL_UNKNOWN');
  t.match((err as MeshpError).message, /firewalld/);
});
