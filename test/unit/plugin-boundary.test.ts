import t from 'tap';
import { PLUGIN_API_VERSION, MeshpError, type FileStore, type Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { oneLine } from '@meshp/core/util';

function filesPlugin(name: string, store: Partial<FileStore>): Plugin {
  return {
    name,
    apiVersion: PLUGIN_API_VERSION,
    apply(h) {
      h.hooks.files.tapPromise(name, async () => store as FileStore);
    },
  };
}

t.test('two plugins that both provide the file store are refused, naming both', async (t) => {
  const host = new Host().use(filesPlugin('files-a', {}), filesPlugin('files-b', {}));
  const err = await host.files().catch((e: unknown) => e);
  t.ok(err instanceof MeshpError);
  t.equal((err as MeshpError).code, 'MESHP_PROVIDER_TWICE');
  t.match((err as MeshpError).message, /files-a and files-b/);
});

t.test('a plugin that taps the provider hook but declines leaves the other as the one provider', async (t) => {
  const decline: Plugin = { name: 'maybe', apiVersion: PLUGIN_API_VERSION, apply: (h) => h.hooks.files.tapPromise('maybe', async () => undefined) };
  const host = new Host().use(decline, filesPlugin('files-a', { read: async () => null }));
  const files = await host.files();
  t.equal(await files!.read('/x'), null);
});

t.test('an error thrown by a provided file store names the plugin and the method, the cause kept', async (t) => {
  const cause = new Error('disk full');
  const host = new Host().use(
    filesPlugin('files-a', {
      async write() {
        throw cause;
      },
    }),
  );
  const files = await host.files();
  const err = await files!.write('/etc/x', new Uint8Array(), 0o644).catch((e: unknown) => e);
  t.ok(err instanceof MeshpError);
  t.equal((err as MeshpError).code, 'MESHP_PLUGIN_FAILED');
  t.same((err as MeshpError).attribution, { plugin: 'files-a', hook: 'files.write' });
  t.equal((err as MeshpError).cause, cause);
  t.equal(oneLine(err), 'MESHP_PLUGIN_FAILED: disk full [files-a at files.write]');
});

t.test('a coded error from a plugin keeps its code and gains the attribution', async (t) => {
  const host = new Host().use(
    filesPlugin('files-a', {
      async read() {
        throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', '/../x escapes');
      },
    }),
  );
  const err = await (await host.files())!.read('/../x').catch((e: unknown) => e);
  t.equal((err as MeshpError).code, 'MESHP_PATH_ESCAPES_ROOT');
  t.same((err as MeshpError).attribution, { plugin: 'files-a', hook: 'files.read' });
});

t.test('with two firewall taps, the one that fails is named alone and once', async (t) => {
  const ok: Plugin = { name: 'fw-quiet', apiVersion: PLUGIN_API_VERSION, apply: (h) => h.hooks.firewall.tapPromise('fw-quiet', async () => undefined) };
  const bad: Plugin = {
    name: 'fw-broken',
    apiVersion: PLUGIN_API_VERSION,
    apply: (h) =>
      h.hooks.firewall.tapPromise('fw-broken', async () => {
        throw new Error('nft exploded');
      }),
  };
  const host = new Host().use(ok, bad);
  const err = await host.firewall().catch((e: unknown) => e);
  t.equal(oneLine(err), 'MESHP_PLUGIN_FAILED: nft exploded [fw-broken at firewall]');
});

t.test('a driver a firewall plugin answers with is attributed to that plugin', async (t) => {
  const plugin: Plugin = {
    name: 'fw-mine',
    apiVersion: PLUGIN_API_VERSION,
    apply: (h) =>
      h.hooks.firewall.tapPromise('fw-mine', async (probe) => {
        probe.seen.push({
          kind: 'mine',
          active: true,
          summary: 'mine',
          by: 'fw-mine',
          driver: {
            kind: 'mine',
            openings: async () => {
              throw new Error('lost the table');
            },
          } as never,
        });
      }),
  };
  const driver = await new Host().use(plugin).firewall();
  const err = await driver!.openings().catch((e: unknown) => e);
  t.same((err as MeshpError).attribution, { plugin: 'fw-mine', hook: 'firewall.openings' });
});

t.test('a sync tap that throws in viewChanged is attributed to its plugin', async (t) => {
  const plugin: Plugin = {
    name: 'tunnel-x',
    apiVersion: PLUGIN_API_VERSION,
    apply: (h) =>
      h.hooks.viewChanged.tap('tunnel-x', () => {
        throw new Error('no such interface');
      }),
  };
  const host = new Host().use(plugin);
  const err = (() => {
    try {
      host.hooks.viewChanged.call({} as never);
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  t.same((err as MeshpError).attribution, { plugin: 'tunnel-x', hook: 'viewChanged' });
});

t.test("an error with no code that no plugin raised is core's own, not a plugin's", async (t) => {
  t.equal(oneLine(new TypeError('x is undefined')), 'MESHP_INTERNAL: x is undefined');
});
