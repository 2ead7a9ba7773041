/**
 * Issue 25: a node whose machine uses resolvconf has the mesh's resolver named through resolvconf's
 * own interface entry while it is a member, and not after it leaves; the node's `/etc/resolv.conf`
 * (a link the manager owns) and the manager's files are never written. Debian's real resolvconf,
 * and the same for openresolv (its `/etc/resolv.conf` the plain file openresolv writes: only
 * openresolv writes it, and it is byte for byte as found once the node left), each fetched from apt
 * and never installed (test/helpers/resolvconf-root.ts): chrooted in the node's
 * root inside a mount namespace of its own, so the machine's resolver is never touched. The
 * resolver runs in a network namespace this test makes, on the view's mesh address (a dummy link
 * standing for the tunnel); the C library of the root then resolves mesh names through it.
 * systemd-resolved cannot run here (it needs systemd as PID 1 and the system D-Bus): its commands
 * are checked in test/unit/resolver-managers.test.ts.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readDnsFile } from '@meshp/core/schema';
import { StateDelta } from '@meshp/protocol';
import { JsonChild } from '../helpers/json-child.js';
import { dnsController, dnsmasq, meshLink } from '../helpers/dns-lab.js';
import { netns, runPrefix } from '../helpers/netns.js';
import { openresolvDeb, openresolvRoot, resolvconfDeb, resolvconfRoot, type ResolvconfRoot } from '../helpers/resolvconf-root.js';

const NODE = join(dirname(fileURLToPath(import.meta.url)), '../helpers/dns-node.mjs');
// Not a loopback address: openresolv writes only the local nameservers to resolv.conf when there is one (a local cache, its subscribers' to feed).
const FOUND = '192.0.2.53';

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

interface Kind {
  name: 'resolvconf' | 'openresolv';
  deb(): Promise<string | null>;
  root(deb: string, root: string, entries: Record<string, string>, prefix: string[]): Promise<ResolvconfRoot>;
  entry(ifname: string): string;
  /** Where the manager keeps an interface's entry, under the root. */
  entries: string;
  /** The resolv.conf the manager generates, under the root. */
  generated: string;
  /** The files of /etc the manager itself writes from its entries (openresolv's resolv.conf and its subscribers' configs). */
  writes: string[];
}

const KINDS: Kind[] = [
  // Debian's: /etc/resolv.conf a link into its run folder; entries ordered by interface-order (tun* first).
  {
    name: 'resolvconf',
    deb: resolvconfDeb,
    root: resolvconfRoot,
    entry: (i) => `tun-${i}.meshp`,
    entries: 'run/resolvconf/interface',
    generated: 'run/resolvconf/resolv.conf',
    writes: [],
  },
  // openresolv: /etc/resolv.conf the plain file it writes; entries ordered lo*, then its dynamic_order (tun[0-9]*: the mesh's), then the rest.
  {
    name: 'openresolv',
    deb: openresolvDeb,
    root: openresolvRoot,
    entry: (i) => `tun0.${i}.meshp`,
    entries: 'run/resolvconf/interfaces',
    generated: 'etc/resolv.conf',
    writes: ['/resolv.conf', '/unbound/unbound.conf.d/resolvconf_resolvers.conf'],
  },
];

for (const kind of KINDS)
  t.test(`${kind.name}: the mesh has its own entry while a member, none after it leaves; the found files are never written`, async (t) => {
    const deb = await kind.deb();
    if (!deb) {
      t.fail(`apt cannot fetch ${kind.name} here (apt-get download ${kind.name}): the lab needs the package, fetched, never installed`);
      return;
    }
    const machineResolvConf = sha('/etc/resolv.conf');
    const dir = mkdtempSync(join(tmpdir(), 'meshp-rc-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const prefix = runPrefix(kind.name === 'resolvconf' ? 'rcf' : 'orf');
    const ns = await netns(t, `${prefix}n`);
    const inNs = ['nsenter', `--net=${ns.path}`, '--'];

    const { c, addr } = dnsController();

    // The tunnel's link, standing in: a's mesh address on a link of the node's namespace.
    const ifname = `${prefix}m`;
    await meshLink(ns, ifname, `${prefix}p`, addr('a'));
    await ns.exec('ip', ['addr', 'add', `${FOUND}/32`, 'dev', 'lo']);
    dnsmasq(t, ns, FOUND, ['/public.example/198.51.100.7'], join(dir, 'found.pid'));

    // The machine as its predecessor left it: resolvconf with its eth0 entry (the found resolver).
    const root = join(dir, 'root');
    const rc = await kind.root(deb, root, { 'eth0.dhclient': `nameserver ${FOUND}\nsearch example.org\n` }, inNs);
    const linked = kind.name === 'resolvconf';
    const link = linked ? readlinkSync(join(root, 'etc/resolv.conf')) : null;
    // What openresolv writes from its entries is its own (the mesh's entry changes it, the leave puts it back); every other file of /etc is held.
    const etc = () => {
      const all = tree(join(root, 'etc'));
      for (const w of kind.writes) delete all[w];
      return all;
    };
    const writes = () => Object.fromEntries(kind.writes.map((w) => [w, sha(join(root, 'etc', w))]));
    const config = etc();
    const written = writes();
    const generated = readFileSync(join(root, kind.generated), 'utf8');
    t.match(generated, new RegExp(`nameserver ${FOUND.replace(/\./g, '\\.')}`), `${kind.name} wrote the found resolv.conf`);
    const unchanged = (when: string) => {
      if (link !== null) {
        t.ok(lstatSync(join(root, 'etc/resolv.conf')).isSymbolicLink(), `${when}: etc/resolv.conf still a link`);
        t.equal(readlinkSync(join(root, 'etc/resolv.conf')), link, `${when}: to where it pointed`);
      } else t.notOk(lstatSync(join(root, 'etc/resolv.conf')).isSymbolicLink(), `${when}: etc/resolv.conf still a plain file`);
      t.same(etc(), config, `${when}: every file of the root's /etc byte for byte as found${linked ? '' : ' (but what openresolv writes from its entries)'}`);
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

    // An older agent named its openresolv entry `<if>.meshp` (sorted after the machine's own): a node updated in place loses it on the first set.
    const legacyFile = join(root, kind.entries, `${ifname}.meshp`);
    if (kind.name === 'openresolv') writeFileSync(legacyFile, `nameserver ${addr('a')}\nsearch lab.mesh\n`);
    const first = (await sync())!.dns!;
    if (kind.name === 'openresolv') t.notOk(existsSync(legacyFile), "openresolv: the older agents' entry is taken away when the entry is set");
    t.equal(first.lastError, null, 'the resolver answers');
    t.equal(first.manager, kind.name, `the machine's manager is detected: ${kind.name}`);
    t.ok(first.integrated, 'integrated');
    const entry = kind.entry(ifname);
    t.equal(first.integration, `DNS integrated through ${kind.name} (${entry}: nameserver ${addr('a')}, search lab.mesh)`);
    const entryFile = join(root, kind.entries, entry);
    t.equal(readFileSync(entryFile, 'utf8'), `nameserver ${addr('a')}\nsearch lab.mesh\n`, `${kind.name} holds the mesh's own entry`);
    const now = readFileSync(join(root, kind.generated), 'utf8');
    t.same(
      now.split('\n').filter((l) => l.startsWith('nameserver')),
      [`nameserver ${addr('a')}`, `nameserver ${FOUND}`],
      `the mesh's resolver first (${linked ? "interface-order's tun*" : 'metric 0'}), the machine's own after it`,
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
      left.removed!.some((r) => r === `${kind.name}'s entry ${entry}`),
      'the leave says the entry was removed',
    );
    t.notOk(existsSync(entryFile), 'gone once the node left');
    t.equal(readFileSync(join(root, kind.generated), 'utf8'), generated, `${kind.name}'s resolv.conf byte for byte as found`);
    t.equal(left.dns!.integrated, false);
    t.match(left.dns!.integration, /^DNS not integrated: the resolver configuration is held/);
    unchanged('left');
    t.same(writes(), written, 'what the manager writes from its entries: byte for byte as found');
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
    t.ok(said.removed!.includes(`${kind.name}'s entry ${entry}, if one was left`), 'the leave preview says it');
    t.ok(existsSync(entryFile));
    await leaver.request({ op: 'leave' });
    t.notOk(existsSync(entryFile), 'the leave took it away');
    t.equal(readFileSync(join(root, kind.generated), 'utf8'), generated, `${kind.name}'s resolv.conf byte for byte as found again`);
    unchanged('left after a kill');
    t.same(writes(), written, 'what the manager writes: byte for byte as found again');
    await leaver.request({ op: 'stop' });
    t.notMatch(readFileSync('/proc/self/mounts', 'utf8'), new RegExp(dir), 'no mount of the test left in the machine');
  });
