import t from 'tap';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateDeclaration } from '@meshp/core/reconcile';
import { checkGenesis, type GenesisFacts } from '@meshp/core/lifecycle';
import { checkManifest, defaultPorts, renderModule } from '@meshp/core/catalogue';
import { overlaps } from '@meshp/core/net';

const CATALOGUE = join(dirname(fileURLToPath(import.meta.url)), '../../examples/catalogue');
const catalogue = readdirSync(CATALOGUE)
  .filter((f) => f.endsWith('.json'))
  .map((f) => checkManifest(JSON.parse(readFileSync(join(CATALOGUE, f), 'utf8')), f));

const quiet: GenesisFacts = {
  listening: [{ protocol: 'tcp', address: '127.0.0.1', port: 5000, family: 4, process: 'local' }],
  published: [],
  containers: [],
  firewall: { kind: 'none', manager: 'none', active: false, tables: [], summary: [] },
  addresses: [
    { interface: 'lo', cidr: '127.0.0.1/8' },
    { interface: 'eth0', cidr: '192.0.2.2/24' },
  ],
};
const input = { mode: 'converged' as const, ports: { store: 15432, registry: 15000 }, privateRange: '10.77.0.0/24' };

t.test('a converged genesis on a quiet machine finds nothing', async (t) => {
  t.same(checkGenesis(input, quiet), []);
});

t.test('a converged genesis on a machine in use is refused, naming the firewall and each listener', async (t) => {
  const used: GenesisFacts = {
    ...quiet,
    firewall: { kind: 'nftables', manager: 'nftables.service', active: true, tables: ['inet filter'], summary: ['input policy drop', 'allows tcp 8080'] },
    listening: [...quiet.listening, { protocol: 'tcp', address: '0.0.0.0', port: 22, family: 4, process: 'sshd', pid: 7 }],
    published: [{ container: 'web', containerPort: 80, hostPort: 8080, hostIp: '0.0.0.0', protocol: 'tcp' }],
  };
  const [f, ...rest] = checkGenesis(input, used);
  t.same(rest, []);
  t.equal(f?.code, 'MESHP_MACHINE_IN_USE');
  t.match(f?.message, /active nftables firewall \(input policy drop; allows tcp 8080\)/);
  t.match(f?.message, /sshd \(pid 7\) listening on 0\.0\.0\.0:22\/tcp/);
  t.match(f?.message, /container web publishing 8080\/tcp/);
  t.match(f?.message, /--adopted/);
  t.same(checkGenesis({ ...input, mode: 'adopted' }, used), [], 'adopted: the machine in use is the point');
});

t.test('a held foundation port is refused with the name of its holder', async (t) => {
  const held: GenesisFacts = { ...quiet, published: [{ container: 'old-registry', containerPort: 5000, hostPort: 15000, hostIp: '0.0.0.0', protocol: 'tcp' }] };
  const findings = checkGenesis({ ...input, mode: 'adopted' }, held);
  t.equal(findings.length, 1);
  t.equal(findings[0]?.code, 'MESHP_PORT_HELD');
  t.match(findings[0]?.message, /port registry=15000 is held by container old-registry: give another with --port registry=PORT/);
  t.same(checkGenesis({ ...input, mode: 'adopted', ports: { ...input.ports, registry: 15001 } }, held), [], 'another port: free');
});

t.test("the mesh's own foundation containers (its labels) are neither in use nor holders of their own port (issue 33 item 8)", async (t) => {
  const store = { container: 'meshp-store', containerPort: 5432, hostPort: 15432, hostIp: '0.0.0.0', protocol: 'tcp' as const };
  const container = (labels: Record<string, string>) => ({ name: 'meshp-store', id: 'c1', image: 'postgres:15', state: 'running', labels, ports: [store] });
  const proxy = { protocol: 'tcp' as const, address: '0.0.0.0', port: 15432, family: 4 as const, process: 'docker-proxy', pid: 9 };
  const ours: GenesisFacts = {
    ...quiet,
    published: [store],
    containers: [container({ 'meshp.module': 'store', 'meshp.node': 'm1' })],
    listening: [...quiet.listening, proxy],
  };
  t.same(checkGenesis(input, ours), [], 'a foundation raised before on this engine: nothing found');
  const stranger: GenesisFacts = { ...ours, containers: [container({})] };
  t.same(
    checkGenesis(input, stranger).map((f) => f.code),
    ['MESHP_MACHINE_IN_USE', 'MESHP_PORT_HELD'],
    'the same container without the labels is a predecessor',
  );
  const other: GenesisFacts = { ...ours, containers: [container({ 'meshp.module': 'registry' })] };
  t.match(
    checkGenesis({ ...input, mode: 'adopted' }, other),
    [{ code: 'MESHP_PORT_HELD', message: /store=15432 is held by docker-proxy \(pid 9\) on 0\.0\.0\.0, container meshp-store/ }],
    "another module's container on the port holds it",
  );
});

t.test('a private range overlapping a predecessor tunnel is refused, naming the interface', async (t) => {
  const tunnel = { ...quiet, addresses: [...quiet.addresses, { interface: 'wg-old', cidr: '10.77.0.0/16' }] };
  const [f] = checkGenesis({ ...input, mode: 'adopted' }, tunnel);
  t.equal(f?.code, 'MESHP_RANGE_OVERLAP');
  t.match(f?.message, /wg-old/);
  t.same(checkGenesis({ ...input, mode: 'adopted', privateInterface: 'wg-old' }, tunnel), [], 'unless that interface is the private network itself');
  t.ok(overlaps('fd00::/8', 'fd00:1::/64'));
  t.notOk(overlaps('10.0.0.0/24', '10.0.1.0/24'));
  t.notOk(overlaps('10.0.0.0/8', 'fd00::/8'));
});

t.test('catalogue modules read every port from the node settings, the catalogue only gives defaults', async (t) => {
  const defaults = defaultPorts(catalogue.filter((m) => m.foundation));
  t.same(Object.keys(defaults).sort(), ['broker', 'bus', 'control', 'registry', 'store', 'tunnel']);
  const settings = { ports: { ...defaults, store: 25432 }, privateRange: '10.77.0.0/24' };
  const store = renderModule(
    catalogue.find((m) => m.name === 'store')!,
    settings,
    false,
  );
  t.equal(store.containers?.[0]?.ports?.[0]?.host, 25432, 'the container publishes the chosen port');
  t.equal(store.openings?.[0]?.port, 25432, 'the opening is for the chosen port');
  t.same(store.openings?.[0]?.from, ['10.77.0.0/24']);
  t.match(store.files?.[0]?.content, /port=25432/);
  const decl = validateDeclaration({
    apiVersion: 'meshp/v1',
    node: 'n1',
    mode: 'adopted',
    settings,
    modules: catalogue.map((m) => renderModule(m, settings, false)),
  });
  t.equal(decl.modules.length, catalogue.length, `every catalogue module (${catalogue.length}) renders to a valid declaration`);
  const tunnel = renderModule(
    catalogue.find((m) => m.name === 'tunnel')!,
    { ...settings, ports: { ...settings.ports, tunnel: 51999 } },
    false,
  );
  t.same(
    tunnel.openings?.map((o) => [o.port, o.protocol, o.path, o.from]),
    [[51999, 'udp', 'incoming', []]],
    "the tunnel's UDP port is a foundation port, open to the underlay",
  );
  t.throws(
    () =>
      renderModule(
        catalogue.find((m) => m.name === 'store')!,
        { ports: {} },
        false,
      ),
    { code: 'MESHP_DECLARATION_INVALID' },
  );
});

t.test("the machine-in-use refusal names the found firewall's own rules, not Docker's tables", async (t) => {
  const facts: GenesisFacts = {
    ...quiet,
    firewall: {
      kind: 'nftables',
      manager: 'nftables.service',
      active: true,
      tables: ['inet filter', 'ip nat'],
      summary: ['table inet filter [found]: input (hook input, policy drop, 4 rules)', 'table ip nat [iptables-nft]: POSTROUTING (policy accept)'],
    },
  };
  const [f] = checkGenesis(input, facts);
  t.match(f?.message, /inet filter \[found\]: input \(hook input, policy drop, 4 rules\)/);
  t.notMatch(f?.message, /ip nat/);
});
