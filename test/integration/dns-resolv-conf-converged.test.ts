/**
 * Issue 25: a converged node's plain `/etc/resolv.conf` (in its root) is the mesh's to manage, as a
 * file of the plan: its original recorded first, the mesh's resolver named first and the machine's
 * own after it, the DNS component's search domains applied; put back byte for byte on the return to
 * adopted and when the node leaves. Adopted, it is never written. The resolver, the reconciler, the
 * files-local store and the sqlite state are the real ones, in a network namespace this test makes.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readDnsFile } from '@meshp/core/schema';
import { StateDelta } from '@meshp/protocol';
import { JsonChild } from '../helpers/json-child.js';
import { dnsController, dnsmasq, meshLink } from '../helpers/dns-lab.js';
import { netns, runPrefix } from '../helpers/netns.js';

const NODE = join(dirname(fileURLToPath(import.meta.url)), '../helpers/dns-node.mjs');
const FOUND = '127.0.0.2';

interface Line {
  msg: string;
  id?: number;
  removed?: string[];
  actions?: { key: string; op: string; state: string; reason?: string }[];
  failures?: unknown[];
  dns?: { lastError: string | null; manager: string; integrated: boolean; integration: string };
}

/** One child process speaking JSON lines (test/helpers/json-child.ts). */
class Child extends JsonChild<Line> {}

t.test("a converged node's plain resolv.conf names the mesh's resolver, and comes back byte for byte on the return to adopted and on leaving", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-rcc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  mkdirSync(join(root, 'etc'), { recursive: true });
  const original = `# the machine's own, as its predecessor left it\nnameserver ${FOUND}\nsearch example.org\noptions edns0 timeout:2\n`;
  const file = join(root, 'etc/resolv.conf');
  writeFileSync(file, original, { mode: 0o640 });
  const prefix = runPrefix('rcc');
  const ns = await netns(t, `${prefix}n`);

  const { c, addr } = dnsController();
  c.setDns('lab', readDnsFile({ searchDomains: ['corp.example'] }));
  // The tunnel's link, standing in: a's mesh address on a link of the node's namespace.
  const ifname = `${prefix}m`;
  await meshLink(ns, ifname, `${prefix}p`, addr('a'));
  dnsmasq(t, ns, FOUND, ['/public.example/198.51.100.7'], join(dir, 'found.pid'));

  const state = join(dir, 'state');
  mkdirSync(state);
  const [cmd, args] = ns.wrap(process.execPath, [NODE, JSON.stringify({ root, port: 53, stateDir: state, interface: ifname, stores: true })]);
  const child = new Child(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
  t.teardown(() => {
    if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  });
  const d = c.deltaFor('lab', 'a')!;
  const first = (await child.request({ op: 'delta', delta: StateDelta.toJSON(StateDelta.fromPartial(d as never)) })).dns!;
  t.equal(first.lastError, null, 'the resolver answers');
  t.equal(first.manager, 'file', 'the manager: a plain file');
  t.equal(first.integration, 'DNS not integrated: the resolver configuration is held (etc/resolv.conf a plain file, found: never written on an adopted node)');
  const asIs = (when: string) => {
    t.equal(readFileSync(file, 'utf8'), original, `${when}: resolv.conf byte for byte as found`);
    t.equal(statSync(file).mode & 0o777, 0o640, `${when}: and its mode`);
  };

  const adopted = await child.request({ op: 'reconcile', mode: 'adopted' });
  t.same(adopted.actions, [], 'adopted: the plan has no action on the file');
  asIs('adopted');
  const preview = await child.request({ op: 'reconcile', mode: 'converged', preview: true });
  t.same(
    preview.actions!.map((a) => [a.key, a.op, a.reason]),
    [['file:/etc/resolv.conf', 'converge', "found; its original recorded, then the mesh's resolver named first"]],
    'the converge preview shows the file the mesh will write',
  );
  asIs('a preview');

  const converged = await child.request({ op: 'reconcile', mode: 'converged' });
  t.same(converged.failures, []);
  const managed = readFileSync(file, 'utf8');
  t.same(
    managed.split('\n').filter((l) => !l.startsWith('#')),
    [`nameserver ${addr('a')}`, `nameserver ${FOUND}`, 'search lab.mesh corp.example', 'options edns0 timeout:2', ''],
    "converged: the mesh's resolver first, the machine's own after it, the component's search domains, the original's options",
  );
  t.equal(statSync(file).mode & 0o777, 0o640, 'its mode kept');
  t.ok(converged.dns!.integrated, 'integrated');
  t.match(converged.dns!.integration, /^DNS integrated through \/etc\/resolv\.conf, managed on this converged node/);
  const dig = async (name: string) => (await ns.exec('dig', [`@${addr('a')}`, name, '+short', '+tries=1', '+time=3'])).stdout.trim();
  t.equal(await dig('www.public.example'), '198.51.100.7', "a name outside the mesh still goes to the machine's own resolver, read from the managed file");
  t.equal(await dig('b.lab.mesh'), addr('b'));
  t.same(
    (await child.request({ op: 'reconcile', mode: 'converged' })).actions!.map((a) => a.op),
    ['keep'],
    'again: kept, not written',
  );

  const back = await child.request({ op: 'reconcile', mode: 'adopted' });
  t.same(
    back.actions!.map((a) => [a.op, a.state]),
    [['release', 'released']],
    'the return to adopted puts the original back',
  );
  asIs('returned to adopted');
  t.match(back.dns!.integration, /^DNS not integrated: the resolver configuration is held/);
  t.same((await child.request({ op: 'reconcile', mode: 'adopted' })).actions, [], 'adopted again: nothing more to do');
  asIs('adopted again');

  await child.request({ op: 'reconcile', mode: 'converged' });
  t.equal(readFileSync(file, 'utf8'), managed, 'converged a second time: the same file');
  const left = await child.request({ op: 'leave' });
  t.ok(left.removed!.includes('/etc/resolv.conf, put back byte for byte as it was found'), 'the leave says so');
  asIs('left');
  await child.request({ op: 'stop' });
});
