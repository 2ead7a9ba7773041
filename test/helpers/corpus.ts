/**
 * The corpus of found firewalls (test/fixtures/firewalls): each fixture loaded into a lab server
 * namespace, then the checks of issue 12 with real packets — the opening reachable from the
 * private range and not from outside, a banned address still refused, a bare ACK treated on the
 * mesh's port as on the found firewall's own open port (nf_conntrack_tcp_loose=0), the found rules
 * unchanged except the marked ones, back within one ensure after the found firewall's own reload,
 * exactly the original after the opening is withdrawn; managers refused with nothing written.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { Host, verifyOpenings, type FirewallDriver, type Opening } from '@meshp/core';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { httpd, reach, reaper, tool, type Backend } from './ipt-lab.js';
import { netns, runPrefix, wire, type Netns } from './netns.js';

export const FIXTURES = new URL('../fixtures/firewalls/', import.meta.url).pathname;
export const PRIVATE = '10.80.0.0/16';
export const MESH_PORT = 7443;
const SERVER = '10.80.1.1';
const CLIENT = '10.80.1.2';

export interface Fixture {
  name: string;
  text: string;
  kind: 'nftables' | 'iptables';
  expect: string;
  open: number;
  banned?: string;
  source: string;
}

export function fixture(name: string): Fixture {
  const text = readFileSync(join(FIXTURES, name), 'utf8');
  const head = (k: string) => new RegExp(`^# ${k}: (.+)$`, 'm').exec(text)?.[1]?.trim();
  const source = head('source');
  if (!source) throw new Error(`fixture ${name} names no source`);
  return { name, text, kind: head('kind') as Fixture['kind'], expect: head('expect') ?? 'placed', open: Number(head('open') ?? 22), banned: head('banned'), source };
}

interface Bed {
  server: Netns;
  client: Netns;
  banned: Netns;
  outside: Netns;
  load(): Promise<void>;
  snapshot(): Promise<string>;
}

async function bed(t: Test, f: Fixture, backend: Backend | null): Promise<Bed> {
  const p = runPrefix('fc');
  const server = await netns(t, `${p}s`);
  const client = await netns(t, `${p}c`);
  const banned = await netns(t, `${p}b`);
  const outside = await netns(t, `${p}o`);
  await wire(server, `${SERVER}/24`, client, `${CLIENT}/24`, `${p}1`);
  await wire(server, '10.80.3.1/24', banned, '10.80.3.66/24', `${p}3`);
  await wire(server, '10.81.2.1/24', outside, '10.81.2.2/24', `${p}2`);
  const load = async () => {
    if (backend === null) await server.exec('nft', ['-f', '-'], f.text);
    else await server.exec(tool(backend, 4, 'restore'), [], f.text);
  };
  const snapshot = async () => {
    // Counters count the test's own packets: their values are left out.
    if (backend === null) return (await server.exec('nft', ['list', 'ruleset'])).stdout.replace(/counter packets \d+ bytes \d+/g, 'counter');
    const { stdout } = await server.exec(tool(backend, 4, 'save'), ['-t', 'filter']);
    return stdout.split('\n').filter((l) => !l.startsWith('#')).map((l) => l.replace(/ \[\d+:\d+\]$/, ' [0:0]')).join('\n');
  };
  await load();
  // Conntrack is loaded by the fixture's rules: from now on a bare ACK is INVALID, not picked up.
  await server.exec('sysctl', ['-q', '-w', 'net.netfilter.nf_conntrack_tcp_loose=0']).catch(() => undefined);
  const www = await mkdtemp(join(tmpdir(), `${p}-www-`));
  t.teardown(() => rm(www, { recursive: true, force: true }));
  const children = reaper(t);
  children.push(await httpd(server, MESH_PORT, www), await httpd(server, f.open, www));
  return { server, client, banned, outside, load, snapshot };
}

/** The found rules without the mesh's: marked lines and the mesh's own table left out. */
function foundPart(text: string): string {
  return text
    .replace(/table inet meshp \{[\s\S]*?\n\}\n?/g, '')
    .split('\n')
    .filter((l) => !l.includes('meshp:'))
    .join('\n');
}

const ACK = `
import socket,struct,sys,random,time
src,dst,port=sys.argv[1],sys.argv[2],int(sys.argv[3])
sport=random.randint(20000,60000)
def csum(b):
    if len(b)%2: b+=b'\\0'
    s=sum(struct.unpack('!%dH'%(len(b)//2),b)); s=(s>>16)+(s&0xffff); s+=s>>16; return ~s&0xffff
h=struct.pack('!HHIIBBHHH',sport,port,random.randint(1,2**31),random.randint(1,2**31),5<<4,0x10,65535,0,0)
c=csum(socket.inet_aton(src)+socket.inet_aton(dst)+struct.pack('!BBH',0,6,len(h))+h)
h=h[:16]+struct.pack('!H',c)+h[18:]
s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_TCP)
s.settimeout(0.2)
s.sendto(h,(dst,0))
end=time.time()+1.0
while time.time()<end:
    try: d,a=s.recvfrom(65535)
    except socket.timeout: continue
    if a[0]!=dst: continue
    t=d[(d[0]&15)*4:]
    if struct.unpack('!HH',t[:4])==(port,sport) and t[13]&4: print('rst'); sys.exit(0)
print('none')
`;

/** Whether a bare TCP ACK (no connection) to the port is answered with a RST. */
async function answersAck(ns: Netns, port: number): Promise<boolean> {
  return (await ns.exec('python3', ['-c', ACK, CLIENT, SERVER, String(port)])).stdout.trim() === 'rst';
}

function hostFor(b: Bed, backend: Backend | null, root: string, requested = 'auto'): Host {
  const plugin = backend === null
    ? new NftablesPlugin({ netns: b.server.name, privateRange: PRIVATE })
    : new IptablesPlugin({ runner: nsenterRunner(b.server.path), backends: [backend], privateRange: PRIVATE });
  return new Host({ root, firewall: requested }).use(plugin);
}

/** Every check of the corpus for one fixture on one backend (null: nftables). */
export async function checkFixture(t: Test, name: string, backend: Backend | null): Promise<void> {
  const f = fixture(name);
  t.comment(`${name}: ${f.source}`);
  const b = await bed(t, f, backend);
  const root = await mkdtemp(join(tmpdir(), 'fc-root-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const original = await b.snapshot();
  const kind = backend === null ? 'nftables' : `iptables-${backend}`;

  if (f.expect.startsWith('manager:')) {
    const manager = f.expect.slice('manager:'.length);
    await t.rejects(hostFor(b, backend, root).firewall(), { code: 'MESHP_FIREWALL_UNKNOWN', message: new RegExp(manager) }, `${manager} refused, named`);
    await t.rejects(hostFor(b, backend, root, kind).firewall(), { code: 'MESHP_FIREWALL_UNKNOWN' }, `${kind} asked for by name: refused too`);
    t.equal(await b.snapshot(), original, 'nothing written');
    return;
  }

  const driver = (await hostFor(b, backend, root).firewall()) as FirewallDriver;
  t.equal(driver.kind, kind);
  const web: Opening = { id: 'web/incoming/tcp/7443', module: 'web', port: MESH_PORT, protocol: 'tcp', from: [PRIVATE], path: 'incoming', action: 'accept' };
  t.notOk(await reach(b.client, SERVER, MESH_PORT), 'closed before the opening');
  t.ok(await reach(b.client, SERVER, f.open), `the found firewall's own port ${f.open} is open`);
  const ackOnOpen = await answersAck(b.client, f.open);

  const result = await driver.ensure([web], []);
  t.same(result.refused ?? [], [], 'placed');
  const verdicts = await verifyOpenings(driver, [web]);
  if (f.expect === 'unverified') t.equal(verdicts.get(web.id)?.state, 'unverified', `unverified: ${verdicts.get(web.id)?.reason}`);
  else t.same([...verdicts.values()], [], 'the walk sees it open from the whole range');
  t.ok(await reach(b.client, SERVER, MESH_PORT), 'reachable from the private range');
  t.notOk(await reach(b.outside, '10.81.2.1', MESH_PORT), 'not from outside');
  if (f.banned) t.notOk(await reach(b.banned, '10.80.3.1', MESH_PORT), `the banned ${f.banned} is still refused on the mesh's port`);
  t.equal(await answersAck(b.client, MESH_PORT), ackOnOpen, `a bare ACK is ${ackOnOpen ? 'answered' : 'dropped'} on the mesh's port as on ${f.open}`);
  t.equal(foundPart(await b.snapshot()), foundPart(original), 'the found rules unchanged');

  await b.load();
  t.notOk(await reach(b.client, SERVER, MESH_PORT), "the found firewall's reload loses the opening");
  await driver.ensure([web], []);
  t.ok(await reach(b.client, SERVER, MESH_PORT), 'back after one ensure');

  await driver.ensure([], []);
  t.equal(await b.snapshot(), original, 'withdrawn: exactly the original');
}

/** One tap subtest per fixture. */
export function corpus(tap: Test, names: readonly string[], backend: Backend | null): void {
  for (const name of names) tap.test(`${name} (${backend === null ? 'nftables' : `iptables-${backend}`})`, (t) => checkFixture(t, name, backend));
}
