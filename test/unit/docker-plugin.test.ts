import t from 'tap';
import { PLUGIN_API_VERSION, type HostReport } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { DEFAULT_DOCKER_SOCKET, DockerPlugin, DockerRuntime } from '@meshp/runtime-docker';

async function socketOf(host: Host): Promise<string> {
  const runtime = await host.runtime();
  if (!(runtime instanceof DockerRuntime)) throw new Error('no DockerRuntime');
  return runtime.socketPath;
}

t.test('the plugin speaks the host contract under its own name', async (t) => {
  const plugin = new DockerPlugin();
  t.equal(plugin.name, 'runtime-docker');
  t.equal(plugin.apiVersion, PLUGIN_API_VERSION);
  t.same(new Host().use(plugin).plugins, ['runtime-docker']);
});

t.test('the socket is the plugin option, else the host option, else the default', async (t) => {
  t.equal(await socketOf(new Host({ dockerSocket: '/run/a.sock' }).use(new DockerPlugin({ socketPath: '/run/b.sock' }))), '/run/b.sock');
  t.equal(await socketOf(new Host({ dockerSocket: '/run/a.sock' }).use(new DockerPlugin())), '/run/a.sock');
  t.equal(await socketOf(new Host().use(new DockerPlugin())), DEFAULT_DOCKER_SOCKET);
  t.equal(DEFAULT_DOCKER_SOCKET, '/var/run/docker.sock');
});

t.test('options that cannot work are refused when the plugin is made', async (t) => {
  t.throws(() => new DockerPlugin({ socketPath: 'docker.sock' }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new DockerPlugin({ timeoutMs: -1 }), { code: 'MESHP_PLUGIN_INVALID' });
  t.throws(() => new DockerPlugin({ stopGraceSeconds: Number.NaN }), { code: 'MESHP_PLUGIN_INVALID' });
});

t.test('a report made before the runtime was asked for does not talk to an engine', async (t) => {
  const host = new Host({ dockerSocket: '/nonexistent/docker.sock' }).use(new DockerPlugin());
  const report: HostReport = {
    node: 'n1',
    mode: 'adopted',
    at: 'now',
    firewall: null,
    resources: [],
    counts: { created: 0, owned: 0, held: 0, changed: 0, released: 0, pending: 0, refused: 0, unverified: 0 },
    facts: { other: 1 },
  };
  t.same((await host.hooks.report.promise(report)).facts, { other: 1 });
});
