// The fleet simulator (issue 15): N agents in this one process, each with its own Ed25519 key,
// its own pinned TLS channel and Sync stream to one real `meshp controller serve` (its own
// process), built from the project's client pieces (GrpcControlLink, core's DeltaApplier); the
// host is a no-op: every delta is applied to the view and acked at once, as the real agent does
// after its reconcile. Agents are in groups of 50 (tag gK; the policy lets each group reach itself).
//
// It prints per N: the enrolment rate, the time to open N streams and get their snapshots, the
// controller's CPU and RSS per agent, and for a join (a new agent in group 0), a policy change
// (group 0's rule) and a removal (a group-0 node): the messages sent, the controller CPU, and the
// time from the admin call until every agent that was sent the change has acked it (p50/p99/max),
// with each node's gap read back from the controller, and the bytes those messages took on the wire
// (each one's protobuf encoding). The full-state baseline is what pushing every agent its whole view
// would send: N messages per change, printed next to it. An agent whose stream ends reconnects with
// the agent's own jittered backoff; how streams ended is printed last.
//
// With `--store postgres://…` the controller keeps its state in that database (each size in a schema
// of its own, made and dropped by the bench: nothing else in the database is touched), and with
// `--replicas K` K controllers share it, the agents spread over them round-robin; admin calls go to
// the first; CPU and RSS are summed over the replicas; gaps are read from the replica each agent is on.
//
// Run after `make build`: node bench/fleet/fleet.bench.mjs [sizes, default 200,1000] [--store postgres://…] [--replicas K]
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Backoff, PROTOCOL_REVISION, challengePayload } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { GrpcControlLink, wire } from '@meshp/transport-grpc';
import { connectAdmin } from '../../bin/dist/remote/admin.js';

const MESHP = new URL('../../bin/dist/main.js', import.meta.url).pathname;
const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  argv.splice(i, 2);
  return v;
};
const STORE = flag('--store');
const REPLICAS = Number(flag('--replicas') ?? 1);
if (REPLICAS > 1 && !STORE) throw new Error('--replicas needs --store postgres://… (replicas share one database)');
const sizes = (argv[0] ?? '200,1000').split(',').map(Number);
const GROUP = 50;
const CONCURRENCY = 50;
const fmt = (n, d = 1) => n.toLocaleString('en-US', { maximumFractionDigits: d });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** utime+stime of a process, in ms, and its RSS in KB, from /proc. */
function usageOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  return { cpuMs: ticks * 10, rssKb: rss };
}

async function startController(state, store) {
  const child = spawn(process.execPath, [MESHP, 'controller', 'serve', '--state', state, '--listen', '127.0.0.1:0', ...(store ? ['--store', store] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr.resume();
  // The controller goes with the bench, however it ends (a timeout, ^C).
  process.once('exit', () => child.kill('SIGKILL'));
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => process.exit(130));
  const lines = createInterface({ input: child.stdout });
  const serving = await new Promise((resolve, reject) => {
    lines.on('line', (l) => {
      try {
        const o = JSON.parse(l);
        if (o.msg === 'controller serving') resolve(o);
      } catch {
        // not a log line
      }
    });
    child.once('exit', (c) => reject(new Error(`controller exited ${c}`)));
  });
  return { child, address: String(serving.address), fingerprint: String(serving.fingerprint) };
}

class SimAgent {
  applier = new DeltaApplier();
  key = generateKeyPairSync('ed25519');
  acked = new Map(); // version → time acked
  deltas = 0;
  bytes = 0;
  firstAt = 0;
  /** Streams opened (reconnects: the agent's own jittered backoff) and how they ended. */
  opens = 0;
  ends = new Map();
  backoff = new Backoff({ initialMs: 250, maxMs: 15_000 });
  closed = false;

  constructor(ctl, name) {
    this.name = name;
    this.link = new GrpcControlLink({ address: ctl.address, fingerprint: ctl.fingerprint });
  }

  async enrol(token) {
    const nodeKey = this.key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    // As the agent does: an answer that did not come (a busy machine) is asked again with the same token and key.
    for (let attempt = 1; ; attempt++) {
      try {
        this.enrolment = await this.link.enrol({ token, nodeKey, node: this.name, endpoints: [] });
        return;
      } catch (e) {
        if (e?.code !== 'MESHP_UNAVAILABLE' || attempt >= 5) throw e;
        await sleep(this.backoff.next());
      }
    }
  }

  open() {
    if (this.closed) return;
    const ch = this.link.sync();
    this.ch = ch;
    this.opens++;
    ch.onClose((e) => {
      const code = e?.code ?? 'closed';
      this.ends.set(code, (this.ends.get(code) ?? 0) + 1);
      if (!this.closed) setTimeout(() => this.open(), this.backoff.next());
    });
    ch.onMessage((m) => {
      if ('challenge' in m) {
        const { appliedVersion, stateHash } = this.applier.hello();
        const signature = sign(null, challengePayload(this.enrolment.node, m.challenge), this.key.privateKey);
        ch.send({ hello: { node: this.enrolment.node, credential: this.enrolment.credential, appliedVersion, stateHash, revision: PROTOCOL_REVISION, signature } });
      } else if ('delta' in m) {
        this.deltas++;
        // Its size on the wire: the protobuf encoding of the message received.
        this.bytes += wire.SyncResponse.encode(wire.SyncResponse.fromPartial({ delta: m.delta })).finish().length;
        let r;
        try {
          r = this.applier.receive(m.delta);
        } catch (err) {
          ch.send({ resync: this.applier.resyncRequest(err) });
          return;
        }
        if (r.status !== 'applied') return;
        if (!this.firstAt) this.firstAt = performance.now();
        this.backoff.reset();
        this.acked.set(r.ack.appliedVersion, performance.now());
        ch.send({ ack: r.ack });
      }
    });
  }

  close() {
    this.closed = true;
    this.ch?.close?.();
    this.link.close?.();
  }
}

function ends(agents) {
  const out = new Map();
  for (const a of agents) for (const [k, v] of a.ends) out.set(k, (out.get(k) ?? 0) + v);
  return out;
}

async function pool(items, n, fn) {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]);
  }));
}

const pct = (xs, p) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] : NaN);

/** A schema of its own in the database for one size (search_path in the URL), and how to drop it. */
async function schemaFor(url, n) {
  const { default: pg } = await import('pg');
  const name = `meshp_fleet_${n}_${process.pid}`;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`CREATE SCHEMA ${name}`);
  await c.end();
  return {
    url: `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${name}`)}`,
    drop: async () => {
      const d = new pg.Client({ connectionString: url });
      await d.connect();
      await d.query(`DROP SCHEMA ${name} CASCADE`);
      await d.end();
    },
  };
}

/** Another replica's folder: the first one's certificate (agents pin it), version key and admin credential. */
function replicaState(from, to) {
  mkdirSync(join(to, 'tls'), { recursive: true, mode: 0o700 });
  for (const f of ['tls/controller.crt', 'tls/controller.key', 'controller.version.key', 'admin.credential']) {
    copyFileSync(join(from, f), join(to, f));
    chmodSync(join(to, f), 0o600);
  }
}

async function run(n) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-fleet-'));
  const schema = STORE ? await schemaFor(STORE, n) : null;
  const ctls = [await startController(join(dir, 'ctl0'), schema?.url)];
  for (let k = 1; k < REPLICAS; k++) {
    replicaState(join(dir, 'ctl0'), join(dir, `ctl${k}`));
    ctls.push(await startController(join(dir, `ctl${k}`), schema?.url));
  }
  const ctl = ctls[0];
  const admins = await Promise.all(ctls.map((_, k) => connectAdmin({ state: join(dir, `ctl${k}`) })));
  const admin = admins[0];
  /** CPU and RSS of every replica, summed. */
  const usage = () => ctls.map((c) => usageOf(c.child.pid)).reduce((a, b) => ({ cpuMs: a.cpuMs + b.cpuMs, rssKb: a.rssKb + b.rssKb }));
  const network = 'default';
  const groups = Math.ceil(n / GROUP);
  const rules = Array.from({ length: groups }, (_, g) => ({ fromTag: `g${g}`, toTag: `g${g}`, ports: [] }));
  await admin.call('setPolicy', { network, rules });
  const idle = usage();

  // Enrolment: one token each (single-use), CONCURRENCY at a time.
  const agents = Array.from({ length: n }, (_, i) => new SimAgent(ctls[i % ctls.length], `a${i}`));
  let t0 = performance.now();
  let enrolled = 0;
  await pool(agents, CONCURRENCY, async (a) => {
    const g = Number(a.name.slice(1)) % groups;
    const { token } = await admin.call('createToken', { network, mode: 2, ttlSeconds: 3600, tags: [`g${g}`] });
    await a.enrol(token);
    if (++enrolled % 1000 === 0) console.error(`[N=${n}] ${enrolled} enrolled after ${fmt((performance.now() - t0) / 1000)} s`);
  });
  const enrolS = (performance.now() - t0) / 1000;
  console.error(`[N=${n}] enrolled ${n} in ${fmt(enrolS)} s (${fmt(n / enrolS)}/s)`);

  // Streams opened, snapshots received.
  t0 = performance.now();
  for (const a of agents) a.open();
  for (let last = -1, still = 0; agents.some((a) => !a.firstAt); ) {
    await sleep(500);
    const got = agents.filter((a) => a.firstAt).length;
    still = got === last ? still + 1 : 0;
    last = got;
    if (still > 0 && still % 20 === 0) console.error(`waiting: ${got} of ${n} snapshotted; stream ends so far: ${JSON.stringify(Object.fromEntries(ends(agents)))}`);
  }
  const snapS = (performance.now() - t0) / 1000;
  console.error(`[N=${n}] ${n} streams opened and snapshotted in ${fmt(snapS)} s`);
  await sleep(1000);
  const held = usage();

  const rows = [];
  const change = async (name, act) => {
    for (const a of agents) a.acked.clear();
    const before = usage();
    const sentBefore = agents.reduce((s, a) => s + a.deltas, 0);
    const bytesBefore = agents.reduce((s, a) => s + a.bytes, 0);
    const start = performance.now();
    await act();
    // settle: no new ack for 1 s
    let last = -1;
    for (;;) {
      await sleep(1000);
      const now = agents.reduce((s, a) => s + a.acked.size, 0);
      if (now === last) break;
      last = now;
    }
    const after = usage();
    const times = agents.filter((a) => a.acked.size).map((a) => Math.max(...a.acked.values()) - start);
    // Each replica knows exactly the gaps of the agents connected to it.
    let gaps = 0;
    for (const a of admins) {
      const { nodes } = await a.call('listNodes', { network });
      gaps += nodes.filter((x) => (admins.length === 1 || x.connected) && Number(x.gap ?? 0) !== 0).length;
    }
    rows.push({ name, bytes: agents.reduce((s, a) => s + a.bytes, 0) - bytesBefore, messages: agents.reduce((s, a) => s + a.deltas, 0) - sentBefore, acked: times.length, cpuMs: after.cpuMs - before.cpuMs, p50: pct(times, 50), p99: pct(times, 99), max: Math.max(0, ...times), gaps });
  };

  const late = new SimAgent(ctl, 'late');
  await change('join', async () => {
    const { token } = await admin.call('createToken', { network, mode: 2, ttlSeconds: 3600, tags: ['g0'] });
    await late.enrol(token);
    late.open();
    agents.push(late);
  });
  await change('policy change', () => admin.call('setPolicy', { network, rules: rules.map((r, g) => (g === 0 ? { ...r, ports: ['443'] } : r)) }));
  await change('removal', () => admin.call('removeNode', { network, node: 'a0' }));

  console.log(`\nN = ${fmt(n)} agents in groups of ${GROUP}; ${STORE ? `PostgreSQL, ${ctls.length} replica(s)` : 'SQLite'}; controller pid ${ctls.map((c) => c.child.pid).join(', ')}`);
  console.log(`enrolment: ${fmt(n / enrolS)}/s (${fmt(enrolS)} s); ${fmt(n)} streams opened and snapshotted in ${fmt(snapS)} s`);
  console.log(`controller while enrolling and snapshotting: ${fmt((held.cpuMs - idle.cpuMs) / n, 2)} ms CPU per agent; RSS ${fmt((held.rssKb - idle.rssKb) / n)} KB per agent (${fmt(held.rssKb / 1024)} MB)`);
  console.log('change          msgs    bytes  acked  ctl cpu ms   gap-0 p50   p99    max ms  gaps≠0 | full-state msgs  ratio');
  for (const r of rows) {
    console.log([r.name.padEnd(14), fmt(r.messages).padStart(5), fmt(r.bytes).padStart(8), fmt(r.acked).padStart(6), fmt(r.cpuMs).padStart(11), fmt(r.p50, 0).padStart(11), fmt(r.p99, 0).padStart(5), fmt(r.max, 0).padStart(9), String(r.gaps).padStart(7), '|', fmt(agents.length).padStart(15), `${fmt(agents.length / Math.max(1, r.messages))}x`.padStart(6)].join(' '));
  }
  const e = ends(agents);
  console.log(`streams opened ${fmt(agents.reduce((k, a) => k + a.opens, 0))} for ${fmt(agents.length)} agents; ended: ${e.size ? JSON.stringify(Object.fromEntries(e)) : 'none'}`);
  for (const a of agents) a.close();
  for (const a of admins) a.close();
  for (const c of ctls) {
    c.child.kill('SIGTERM');
    await new Promise((r) => c.child.once('exit', r));
  }
  await schema?.drop();
  rmSync(dir, { recursive: true, force: true });
}

for (const n of sizes) await run(n);
process.exit(0);
