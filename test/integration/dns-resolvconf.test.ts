/**
 * Issue 25: a node whose machine uses resolvconf has the mesh's resolver named through resolvconf's
 * own interface entry while it is a member, and not after it leaves; the node's `/etc/resolv.conf`
 * (a link the manager owns) and the manager's files are never written. Debian's real resolvconf,
 * fetched from apt and never installed (test/helpers/resolvconf-root.ts): chrooted in the node's
 * root inside a mount namespace of its own, so the machine's resolver is never touched. The
 * resolver runs in a network namespace this test makes, on the view's mesh address (a dummy link
 * standing for the tunnel); the C library of the root then resolves mesh names through it.
 * systemd-resolved cannot run here (it needs systemd as PID 1 and the system D-Bus): its commands
 * are checked in test/unit/resolver-managers.test.ts.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readDnsFile } from '@meshp/core/schema';
import { StateDelta } from '@meshp/protocol';
import { JsonChild } from '../helpers/json-child.js';
import { dnsController, dnsmasq, meshLink } from '../helpers/dns-lab.js';
import { netns, runPrefix } from '../helpers/netns.js';
import { resolvconfDeb, resolvconfRoot } from '../helpers/resolvconf-root.js';

const NODE = join(dirname(fileURLToPath(import.meta.url)), '../helpers/dns-node.mjs');
const FOUND = '127.0.0.2';

interface Line {
  msg: string;
  id?: number;
  removed?: string[];
  dns?: { lastError: string | null; manager: string; integrated: boolean; integration: string };
}

/** One child process speaking JSON lines (test/helpers/json-child.ts). */
class Child extends JsonChild<Line> {}

/** Every file under a folder, by path: a link's target (not followed), a regular file's bytes' hash. */
function tree(dir: string, base = dir): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    const st = lstatSync(p);
    if (st.isDirectory()) Object.assign(out, tree(p, base));
    else if (st.isSymbolicLink()) out[p.slice(base.length)] = `-> ${readlinkSync(p)}`;
    else out[p.slice(base.length)] = createHash('sha256').update(readFileSync(p)).digest('hex');
  }
  return out;
}

const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

t.test('resolvconf: the mesh has its own entry while a member, none after it leaves; the found files are never written', async (t) => {
  const deb = await resolvconfDeb();
  if (!deb) {
    t.fail('apt cannot fetch resolvconf here (apt-get download resolvconf): the lab needs the package, fetched, never installed');
    return;
  }
  const machineResolvConf = sha('/etc/resolv.conf');
  const dir = mkdtempSync(join(tmpdir(), 'meshp-rc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const prefix = runPrefix('rcf');
  const ns = await netns(t, `${prefix}n`);
  const inNs = ['nsenter', `--net=${ns.path}`, '--'];

  const { c, addr } = dnsController();

  // The tunnel's link, standing in: a's mesh address on a link of the node's namespace.
  const ifname = `${prefix}m`;
  await meshLink(ns, ifname, `${prefix}p`, addr('a'));
  dnsmasq(t, ns, FOUND, ['/public.example/198.51.100.7'], join(dir, 'found.pid'));

  // The machine as its predecessor left it: resolvconf with its eth0 entry (the found resolver).
  const root = join(dir, 'root');
  const rc = await resolvconfRoot(deb, root, { 'eth0.dhclient': `nameserver ${FOUND}\nsearch example.org\n` }, inNs);
  const link = readlinkSync(join(root, 'etc/resolv.conf'));
  const config = tree(join(root, 'etc'));
  const generated = readFileSync(join(root, 'run/resolvconf/resolv.conf'), 'utf8');
  t.match(generated, new RegExp(`nameserver ${FOUND.replace(/\./g, '\\.')}`), 'resolvconf wrote the found resolv.conf');
  const unchanged = (when: string) => {
    t.ok(lstatSync(join(root, 'etc/resolv.conf')).isSymbolicLink(), `${when}: etc/resolv.conf still a link`);
    t.equal(readlinkSync(join(root, 'etc/resolv.conf')), link, `${when}: to where it pointed`);
    t.same(tree(join(root, 'etc')), config, `${when}: every file of the root's /etc byte for byte as found`);
    t.equal(sha('/etc/resolv.conf'), machineResolvConf, `${when}: the machine's own /etc/resolv.conf untouched`);
  };

  const conf = { root, port: 53, stateDir: dir, interface: ifname, commands: { resolvconf: rc.command } };
  const [cmd, args] = ns.wrap(process.execPath, [NODE, JSON.stringify(conf)]);
  const child = new Child(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
  t.teardown(() => {
    if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  });
  await child.wait((l) => l.msg === 'ready');
  const sync = async () => {
    const d = c.deltaFor('lab', 'a');
    if (!d) return null;
    return child.request({ op: 'delta', delta: StateDelta.toJSON(StateDelta.fromPartial(d as never)) });
  };

  const first = (await sync())!.dns!;
  t.equal(first.lastError, null, 'the resolver answers');
  t.equal(first.manager, 'resolvconf', "the machine's manager is detected: resolvconf");
  t.ok(first.integrated, 'integrated');
  const entry = `tun-${ifname}.meshp`;
  t.equal(first.integration, `DNS integrated through resolvconf (${entry}: nameserver ${addr('a')}, search lab.mesh)`);
  const entryFile = join(root, 'run/resolvconf/interface', entry);
  t.equal(readFileSync(entryFile, 'utf8'), `nameserver ${addr('a')}\nsearch lab.mesh\n`, "resolvconf holds the mesh's own entry");
  const now = readFileSync(join(root, 'run/resolvconf/resolv.conf'), 'utf8');
  t.same(
    now.split('\n').filter((l) => l.startsWith('nameserver')),
    [`nameserver ${addr('a')}`, `nameserver ${FOUND}`],
    "the mesh's resolver first (interface-order's tun*), the machine's own after it",
  );
  t.match(now, /^search lab\.mesh example\.org$/m, 'and the mesh domain searched');
  unchanged('a member');

  // The machine's own resolver (the root's C library) now resolves mesh names, short ones by the search list; the rest as before.
  const getent = async (name: string) => (await rc.exec(inNs, ['getent', 'ahostsv4', name]).catch(() => ({ stdout: '' }))).stdout.split(/\s+/)[0] ?? '';
  t.equal(await getent('b.lab.mesh'), addr('b'), "the root's libc resolves b.lab.mesh to b's mesh address");
  t.equal(await getent('b'), addr('b'), "and 'b' through the search list");
  t.equal(await getent('www.public.example'), '198.51.100.7', "a name outside the mesh: forwarded to the machine's found resolver");

  c.setDns('lab', readDnsFile({ searchDomains: ['corp.example'] }));
  const changed = (await sync())!.dns!;
  t.match(changed.integration, /search lab\.mesh corp\.example\)$/, "the DNS component's search domains applied to the entry");
  t.equal(readFileSync(entryFile, 'utf8'), `nameserver ${addr('a')}\nsearch lab.mesh corp.example\n`);
  unchanged('search domains changed');

  const preview = await child.request({ op: 'leave', preview: true });
  t.ok(
    preview.removed!.some((r) => r.includes(entry)),
    'the leave preview names the entry',
  );
  t.ok(existsSync(entryFile), 'a preview removes nothing');
  const left = await child.request({ op: 'leave' });
  t.ok(
    left.removed!.some((r) => r === `resolvconf's entry ${entry}`),
    'the leave says the entry was removed',
  );
  t.notOk(existsSync(entryFile), 'gone once the node left');
  t.equal(readFileSync(join(root, 'run/resolvconf/resolv.conf'), 'utf8'), generated, "resolvconf's resolv.conf byte for byte as found");
  t.equal(left.dns!.integrated, false);
  t.match(left.dns!.integration, /^DNS not integrated: the resolver configuration is held/);
  unchanged('left');
  await child.request({ op: 'stop' });

  // An agent killed while a member leaves its entry behind; `meshp agent leave` (a resolver that is not running) takes it away.
  const start = () => {
    const [c2, a2] = ns.wrap(process.execPath, [NODE, JSON.stringify(conf)]);
    const ch = new Child(spawn(c2, a2, { stdio: ['pipe', 'pipe', 'pipe'] }));
    t.teardown(() => {
      if (ch.proc.exitCode === null) ch.proc.kill('SIGKILL');
    });
    return ch;
  };
  const killed = start();
  await killed.wait((l) => l.msg === 'ready');
  // A node that left has no view any more: the controller's snapshot of it before the leave stands for the one it restarted with.
  const snap = c.snapshotOf('lab', 'a').delta;
  await killed.request({ op: 'delta', delta: StateDelta.toJSON(StateDelta.fromPartial(snap as never)) });
  t.ok(existsSync(entryFile), 'a resolver started again sets the entry again');
  killed.proc.kill('SIGKILL');
  await new Promise((r) => killed.proc.once('exit', r));
  t.ok(existsSync(entryFile), 'killed: its entry is left');
  const leaver = start();
  await leaver.wait((l) => l.msg === 'ready');
  const said = await leaver.request({ op: 'leave', preview: true });
  t.ok(said.removed!.includes(`resolvconf's entry ${entry}, if one was left`), 'the leave preview says it');
  t.ok(existsSync(entryFile));
  await leaver.request({ op: 'leave' });
  t.notOk(existsSync(entryFile), 'the leave took it away');
  t.equal(readFileSync(join(root, 'run/resolvconf/resolv.conf'), 'utf8'), generated, "resolvconf's resolv.conf byte for byte as found again");
  unchanged('left after a kill');
  await leaver.request({ op: 'stop' });
  t.notMatch(readFileSync('/proc/self/mounts', 'utf8'), new RegExp(dir), 'no mount of the test left in the machine');
});
