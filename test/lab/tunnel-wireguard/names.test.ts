/**
 * Names in the mesh (issue 25), in the real mesh of mesh.test.ts: `meshp genesis` on the control-node,
 * three agents enrolled over the underlay, each with the resolver on its mesh address, asked by real
 * `dig` inside each agent's namespace. The policy scopes the names as it scopes peers; a rename, a
 * removal, an extra record and a CNAME, a split domain answered by a "corporate" dnsmasq and every
 * other name by the "found" one (named by a1's /etc/resolv.conf, byte for byte as it was at the end):
 * both dnsmasq run in the outside machine's namespace, so no query leaves the test's namespaces.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { workdir, writeJson } from '../../helpers/grpc-procs.js';
import { labAvailable, type Netns } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { OUTSIDE_IP, meshAddress, meshBed, type Node } from './mesh-bed.js';

fileBudget(240);

const CORP_IP = '10.97.0.21';

async function dig(ns: Netns, server: string, name: string, type = 'A', tcp = false): Promise<{ status: string; answers: string[] }> {
  const { stdout } = await ns.exec('dig', [`@${server}`, name, type, '+tries=1', '+time=2', '+noall', '+comments', '+answer', ...(tcp ? ['+tcp'] : [])]);
  const answers = stdout
    .split('\n')
    .filter((l) => l && !l.startsWith(';'))
    .map((l) => l.split(/\s+/))
    .map((f) => `${f[3]} ${f[4]}`);
  return { status: /status: (\w+)/.exec(stdout)?.[1] ?? 'none', answers };
}

t.test(
  "every node answers the names of the peers its policy lets it see, and forwards the rest where the machine's own resolver would",
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgnames');
    const b = await meshBed(t, dir);
    const [a1, a2, a3] = b.agents as [Node, Node, Node];
    await b.policy([{ from: 'x', to: 'y' }]);
    const tokens = await Promise.all(
      ['x', 'y', 'z'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(b.c);
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!]));
    try {
      for (const n of [b.c, ...b.agents]) await n.proc!.waitFor((l) => l.msg === 'dns resolver answering', 90_000);
    } catch (e) {
      for (const n of [b.c, ...b.agents]) t.comment(`${n.name}: ${JSON.stringify(n.proc!.lines.filter((l) => l.msg !== 'reconciled').slice(-30))}`);
      t.comment(`ruleset of m1: ${(await b.c.ns.exec('nft', ['list', 'ruleset'])).stdout}`);
      throw e;
    }
    const mesh = new Map<Node, string>();
    for (const n of [b.c, ...b.agents]) mesh.set(n, await meshAddress(n));
    // Once the mesh is up: the outside machine is the found resolver (public.example) and, on a second address, the corporate one.
    await b.outside.exec('ip', [
      'addr',
      'add',
      `${CORP_IP}/24`,
      'dev',
      // The interface that holds the outside machine's own address (`ip -o addr show to IP`: "2: NAME inet …").
      (await b.outside.exec('ip', ['-o', 'addr', 'show', 'to', OUTSIDE_IP])).stdout.split(/\s+/)[1]!.replace(/@.*$/, ''),
    ]);
    for (const [ip, addr, log] of [
      [OUTSIDE_IP, '/public.example/198.51.100.7', 'found.log'],
      [CORP_IP, '/corp.example/10.1.2.3', 'corp.log'],
    ] as const) {
      const args = ['--keep-in-foreground', '--no-resolv', '--no-hosts', '--conf-file=/dev/null', '--user=root', '--bind-interfaces', `--listen-address=${ip}`];
      args.push('--port=53', `--address=${addr}`, '--log-queries', `--log-facility=${join(dir, log)}`, `--pid-file=${join(dir, `${log}.pid`)}`);
      const [cmd, rest] = b.outside.wrap('dnsmasq', args);
      const p = spawn(cmd, rest, { stdio: 'ignore' });
      t.teardown(() => {
        if (p.exitCode === null) p.kill('SIGKILL');
      });
    }
    const resolvConf = `# a1's own resolver, found and held\nnameserver ${OUTSIDE_IP}\noptions edns0\n`;
    const a1Root = join(dir, 'a1', 'root');
    mkdirSync(join(a1Root, 'etc'), { recursive: true });
    writeFileSync(join(a1Root, 'etc/resolv.conf'), resolvConf);

    const ask = (from: Node, name: string, type = 'A', tcp = false) => dig(from.ns, mesh.get(from)!, name, type, tcp);
    const resolves = (from: Node, name: string, to: string) =>
      until(`${from.name} resolves ${name}`, async () => JSON.stringify((await ask(from, name)).answers) === JSON.stringify([`A ${to}`]), 15, 100);
    const gone = (from: Node, name: string) => until(`${name} NXDOMAIN from ${from.name}`, async () => (await ask(from, name)).status === 'NXDOMAIN', 15, 100);

    await t.test("a2's name resolves from a1, over UDP and TCP; a3, hidden by the policy, is NXDOMAIN", async (t) => {
      await resolves(a1, 'a2.default.mesh', mesh.get(a2)!);
      t.pass("a2.default.mesh is a2's mesh address from a1");
      t.same((await ask(a1, 'a2.default.mesh', 'A', true)).answers, [`A ${mesh.get(a2)}`], 'over TCP');
      t.equal((await ask(a1, 'a3.default.mesh')).status, 'NXDOMAIN', 'a3 is hidden from a1: no name');
      t.same((await ask(a3, 'a1.default.mesh')).status, 'NXDOMAIN', 'nor a1 from a3');
    });

    await t.test('the store resolves on every member under an empty policy', async (t) => {
      await b.policy([]);
      for (const a of b.agents) {
        await resolves(a, 'store.default.mesh', mesh.get(b.c)!);
        t.pass(`${a.name}: store.default.mesh is the control-node`);
      }
      await gone(a1, 'a2.default.mesh');
      t.pass('and a2 is gone from a1 with the rule that let a1 see it');
    });

    await t.test('a policy that lets a1 see a3 gives its name at once; a rename and a removal move the names', async (t) => {
      await b.policy([
        { from: 'x', to: 'y' },
        { from: 'x', to: 'z' },
      ]);
      const at = Date.now();
      await resolves(a1, 'a3.default.mesh', mesh.get(a3)!);
      t.comment(`a3's name resolved from a1 ${Date.now() - at} ms after the policy was set`);
      await b.cli('node', 'rename', 'a2', 'web');
      await resolves(a1, 'web.default.mesh', mesh.get(a2)!);
      await gone(a1, 'a2.default.mesh');
      t.pass('renamed: web resolves, a2 is NXDOMAIN');
    });

    await t.test('dns set: an extra record, a CNAME, a split domain; every other name to the found resolver', async (t) => {
      const file = writeJson(dir, 'dns.json', {
        split: [{ domain: 'corp.example', nameservers: [CORP_IP] }],
        records: [
          { name: 'printer', type: 'A', value: '100.96.9.9' },
          { name: 'www', type: 'CNAME', value: 'web' },
        ],
      });
      const preview = JSON.parse(await b.cli('dns', 'set', file, '--preview', '--json')) as { changedNodes: string[] };
      t.same(preview.changedNodes, ['a1', 'a3', 'm1', 'web'], 'the preview names the nodes whose answers change');
      t.equal((await ask(a1, 'printer.default.mesh')).status, 'NXDOMAIN', 'a preview changed nothing');
      await b.cli('dns', 'set', file, '--yes');
      await resolves(a1, 'printer.default.mesh', '100.96.9.9');
      t.same((await ask(a1, 'www.default.mesh')).answers, ['CNAME web.default.mesh.', `A ${mesh.get(a2)}`], 'the CNAME, followed');
      t.same((await ask(a1, 'host.corp.example')).answers, ['A 10.1.2.3'], 'the split domain, from the corporate server');
      t.same((await ask(a1, 'www.public.example')).answers, ['A 198.51.100.7'], "the rest, from a1's found resolver");
      t.match(readFileSync(join(dir, 'corp.log'), 'utf8'), /host\.corp\.example/);
      t.notMatch(
        readFileSync(join(dir, 'found.log'), 'utf8'),
        /corp\.example|default\.mesh/,
        'the found resolver was asked neither a split name nor a mesh name',
      );
      const shown = JSON.parse(await b.cli('dns', 'get', '--json')) as { domainInForce: string; foundation: { name: string }[] };
      t.equal(shown.domainInForce, 'default.mesh');
      t.ok(
        shown.foundation.some((f) => f.name === 'store'),
        'dns get shows the foundation names',
      );
    });

    await t.test('node show, from the controller: where a node answers names and where the rest go', async (t) => {
      type Shown = { dns: { address: string; port: number; domain: string; upstreams: string[]; upstreamsFrom: string } | null };
      const show = async () => (JSON.parse(await b.cli('node', 'show', 'a1', '--json')) as Shown).dns;
      const dns = await until(
        'a1 reports its resolver, with the found nameserver',
        async () => {
          const d = await show();
          return d?.upstreams.length ? d : null;
        },
        30,
        500,
      );
      t.equal(dns!.address, mesh.get(a1), "on a1's mesh address");
      t.equal(dns!.port, 53);
      t.equal(dns!.domain, 'default.mesh');
      t.same([dns!.upstreams, dns!.upstreamsFrom], [[OUTSIDE_IP], 'found'], "the rest to a1's own resolver, as its resolv.conf names it");
      const held = 'DNS not integrated: the resolver configuration is held (etc/resolv.conf a plain file, found: never written on an adopted node)';
      const words = await b.cli('node', 'show', 'a1');
      t.match(words, `dns: answers default.mesh on ${mesh.get(a1)}:53`, 'and in words');
      t.match(words, held, "how DNS is integrated: not, a1's resolv.conf is a plain file on an adopted node");
      const doctored = JSON.parse(await b.cli('doctor', 'a1', '--json')) as { dns: { address: string; manager: string; integrated: boolean } | null };
      t.same(
        [doctored.dns?.address, doctored.dns?.manager, doctored.dns?.integrated],
        [mesh.get(a1), 'file', false],
        'doctor a1 --json carries the resolver and its manager',
      );
      const doctorWords = await b.cli('doctor', 'a1');
      t.match(doctorWords, `dns: answers default.mesh on ${mesh.get(a1)}:53`, 'doctor a1 carries the DNS line');
      t.match(doctorWords, held);
    });

    await t.test("node remove: the name is gone; a1's resolver configuration is byte for byte as it was", async (t) => {
      await b.cli('node', 'remove', 'a3', '--yes');
      await gone(a1, 'a3.default.mesh');
      t.pass('a3 is NXDOMAIN from a1');
      t.equal(readFileSync(join(a1Root, 'etc/resolv.conf'), 'utf8'), resolvConf, 'never written');
    });
  },
);
