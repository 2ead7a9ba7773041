/**
 * Issue 25: the mesh's resolver, asked by real `dig` inside a namespace this test makes, fed real
 * deltas (a controller's, encoded and decoded as on the wire). Two real dnsmasq beside it in the same
 * namespace: the machine's found resolver (named by the root's /etc/resolv.conf) and a "corporate"
 * one serving a split domain. Every query stays on the namespace's loopback.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readDnsFile } from '@meshp/core/schema';
import { StateDelta } from '@meshp/protocol';
import { JsonChild } from '../helpers/json-child.js';
import { dnsController, dnsmasq } from '../helpers/dns-lab.js';
import { netns, runPrefix, type Netns } from '../helpers/netns.js';

const NODE = join(dirname(fileURLToPath(import.meta.url)), '../helpers/dns-node.mjs');
const RESOLVER = '127.0.0.1';
const FOUND = '127.0.0.2';
const CORP = '127.0.0.3';

interface Line {
  msg: string;
  id?: number;
  dns?: { lastError: string | null; lastAnswerError: string; answers: Record<string, number>; upstreamsFrom: string };
}

/** One child process speaking JSON lines (test/helpers/json-child.ts). */
class Child extends JsonChild<Line> {}

interface Dug {
  status: string;
  answers: string[];
}

async function dig(ns: Netns, name: string, type = 'A', tcp = false): Promise<Dug> {
  const { stdout } = await ns.exec('dig', [`@${RESOLVER}`, name, type, '+tries=1', '+time=3', '+noall', '+comments', '+answer', ...(tcp ? ['+tcp'] : [])]);
  const status = /status: (\w+)/.exec(stdout)?.[1] ?? 'none';
  const answers = stdout
    .split('\n')
    .filter((l) => l && !l.startsWith(';'))
    .map((l) => l.split(/\s+/))
    .map((f) => `${f[3]} ${f[4]}`);
  return { status, answers };
}

t.test('the resolver answers the view, forwards the rest where it belongs, and writes nothing of the machine', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'meshp-dns-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'etc'));
  const resolvConf = `# the machine's own\nnameserver ${FOUND}\n`;
  writeFileSync(join(root, 'etc/resolv.conf'), resolvConf);
  const ns = await netns(t, `${runPrefix('dns')}r`);
  dnsmasq(t, ns, FOUND, ['/public.example/198.51.100.7'], join(root, 'found.log.pid'), join(root, 'found.log'));
  dnsmasq(t, ns, CORP, ['/corp.example/10.1.2.3'], join(root, 'corp.log.pid'), join(root, 'corp.log'));

  // A controller: a control-node with the store, node a (tag a) whose resolver this is, b (tag b), c (tag c).
  const { c, addr } = dnsController(['c']);

  const [cmd, args] = ns.wrap(process.execPath, [NODE, JSON.stringify({ root, listenAddress: RESOLVER, port: 53, stateDir: root })]);
  const child = new Child(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
  t.teardown(() => {
    if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  });
  await child.wait((l) => l.msg === 'ready');
  const sync = async () => {
    const d = c.deltaFor('lab', 'a');
    if (!d) return;
    const r = await child.request({ op: 'delta', delta: StateDelta.toJSON(StateDelta.fromPartial(d as never)) });
    t.equal(r.dns?.lastError ?? null, null, 'the resolver took the delta');
  };
  await sync();

  t.same(await dig(ns, 'b.lab.mesh'), { status: 'NOERROR', answers: [`A ${addr('b')}`] }, "b's name resolves to its mesh address");
  t.same(await dig(ns, 'B.Lab.Mesh.', 'A', true), { status: 'NOERROR', answers: [`A ${addr('b')}`] }, 'over TCP, in any case');
  t.same(await dig(ns, 'a.lab.mesh'), { status: 'NOERROR', answers: [`A ${addr('a')}`] }, 'its own name');
  t.same(await dig(ns, 'store.lab.mesh'), { status: 'NOERROR', answers: [`A ${addr('cn')}`] }, 'the store, by name: the control-node');
  t.equal((await dig(ns, 'c.lab.mesh')).status, 'NXDOMAIN', 'c, hidden by the policy, has no name here');
  t.same(await dig(ns, 'b.lab.mesh', 'AAAA'), { status: 'NOERROR', answers: [] }, 'a type the name has none of: NODATA');

  c.setPolicy('lab', [
    { from: 'a', to: 'b' },
    { from: 'a', to: 'c' },
  ]);
  await sync();
  t.same(await dig(ns, 'c.lab.mesh'), { status: 'NOERROR', answers: [`A ${addr('c')}`] }, 'c resolves once the policy lets a see it');
  c.renameNode('lab', 'c', 'c2');
  await sync();
  t.equal((await dig(ns, 'c.lab.mesh')).status, 'NXDOMAIN', 'renamed: the old name is gone');
  t.same((await dig(ns, 'c2.lab.mesh')).answers, [`A ${addr('c2')}`], 'and the new one answers');
  c.leave('lab', 'c2');
  await sync();
  t.equal((await dig(ns, 'c2.lab.mesh')).status, 'NXDOMAIN', 'removed: gone');

  c.setDns(
    'lab',
    readDnsFile({
      split: [{ domain: 'corp.example', nameservers: [CORP] }],
      records: [
        { name: 'printer', type: 'A', value: '100.96.9.9' },
        { name: 'printer', type: 'AAAA', value: 'fd00::9' },
        { name: 'www', type: 'CNAME', value: 'b' },
      ],
    }),
  );
  await sync();
  t.same((await dig(ns, 'printer.lab.mesh')).answers, ['A 100.96.9.9'], 'an extra record');
  t.same((await dig(ns, 'printer.lab.mesh', 'AAAA')).answers, ['AAAA fd00::9']);
  t.same((await dig(ns, 'www.lab.mesh')).answers, ['CNAME b.lab.mesh.', `A ${addr('b')}`], 'a CNAME followed within the mesh');
  t.same(await dig(ns, 'host.corp.example'), { status: 'NOERROR', answers: ['A 10.1.2.3'] }, 'a split domain: its own nameserver');
  t.same(await dig(ns, 'www.public.example'), { status: 'NOERROR', answers: ['A 198.51.100.7'] }, "the rest: the machine's found resolver");
  t.same(await dig(ns, 'www.public.example', 'A', true), { status: 'NOERROR', answers: ['A 198.51.100.7'] }, 'over TCP too');
  const found = readFileSync(join(root, 'found.log'), 'utf8');
  const corp = readFileSync(join(root, 'corp.log'), 'utf8');
  t.match(corp, /query\[A\] host\.corp\.example/, 'the corporate server was asked the split name');
  t.notMatch(found, /corp\.example/, 'the found resolver never was');
  t.notMatch(found + corp, /lab\.mesh/, 'no mesh name left the resolver');

  const st = (await child.request({ op: 'status' })).dns!;
  t.equal(st.upstreamsFrom, 'found');
  t.ok(st.answers.nxdomain >= 3 && st.answers.forwarded >= 3, 'the answers counted by outcome');
  t.equal(readFileSync(join(root, 'etc/resolv.conf'), 'utf8'), resolvConf, 'the resolver configuration byte for byte as it was');
  t.equal(
    createHash('sha256')
      .update(readFileSync(join(root, 'etc/resolv.conf')))
      .digest('hex'),
    createHash('sha256').update(resolvConf).digest('hex'),
  );
  await child.request({ op: 'stop' });
});
