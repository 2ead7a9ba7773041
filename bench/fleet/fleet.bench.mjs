// The fleet simulator (issue 15): N agents, each with its own Ed25519 key, its own pinned TLS
// channel and Sync stream to one real `meshp controller serve` (its own process), built from the
// project's client pieces (GrpcControlLink, core's DeltaApplier); the host is a no-op: every delta is
// applied to the view and acked at once, as the real agent does after its reconcile. Agents are in
// groups of 50 (tag gK; the policy lets each group reach itself). The agents are spread over
// `--workers W` processes (worker.mjs, default one per 2,500 agents, at most 8), each with its share,
// driven from here over IPC, so that the clients are not what is measured: at 10,000 agents one
// process was saturated (TLS, protobuf, its own timers) while the controller was not.
//
// It prints per N: the enrolment rate (and the first and last thousand's), the time to open N
// streams and get their snapshots (opened with at most `--open-window` of them waiting for their
// snapshot, default 200: a pace set by the controller, not a burst of N), the controller's CPU and
// RSS per agent, and for a join (a new agent in group 0), a policy change (group 0's rule) and a
// removal (a group-0 node): the messages sent, the controller CPU, and the time from the admin call
// until every agent that was sent the change has acked it (p50/p99/max), with each node's gap read
// back from the controller, and the bytes those messages took on the wire (each one's protobuf
// encoding). The full-state baseline is what pushing every agent its whole view would send: N
// messages per change, printed next to it. An agent whose stream ends reconnects with the agent's
// own jittered backoff; how streams ended is printed last. The machine's load average is printed with
// each phase, and the simulator's own CPU, so a figure taken on a busy machine says so.
//
// With `--store postgres://…` the controller keeps its state in that database (each size in a schema
// of its own, made and dropped by the bench: nothing else in the database is touched), and with
// `--replicas K` K controllers share it, the agents spread over them round-robin; admin calls go to
// the first; CPU and RSS are summed over the replicas; gaps are read from the replica each agent is on.
// The controller is started with its open-file limit raised to 2N + 1,000 (it holds one socket per
// agent); the limit it got is printed, and said on stderr when it is under one per agent. Only a
// process allowed to (CAP_SYS_RESOURCE) raises the hard limit: where it cannot (a container without
// it), raise it for the shell that runs the bench (`ulimit -Hn`, systemd LimitNOFILE). From one
// loopback address the agents also share about 28,000 ephemeral ports (ip_local_port_range).
//
// Then joins at a steady rate (`--join-rate R` a second for `--join-seconds S`, default 10 for 10 s;
// their tokens made beforehand), each a new agent in a group of its own turn (g1, g2, …): for each, the
// time from its Enrol call until every agent of its group applied and acked the delta bringing it (its
// gap back to 0), and until the joiner's own snapshot; the goal is every gap 0 within 2 s p99.
//
// `--streams-per-connection K` (default 1): K agents in a row share one TLS connection (one HTTP/2
// session, K Sync streams; each agent its own key, credential, stream and signed Hello). Only for a
// machine whose open-file limit cannot give the controller a socket per agent (this container's hard
// limit is 20,000): the RSS per agent then leaves out the connections. Run the same N with K = 1 and
// K > 1 to see what a connection costs. The controller is told to allow K streams a connection
// (`--streams-per-connection`: by default it refuses a fifth, MESHP_RATE_LIMITED).
//
// Run after `make build`: node bench/fleet/fleet.bench.mjs [sizes, default 200,1000] [--store postgres://…]
//   [--replicas K] [--workers W] [--open-window M] [--concurrency C (enrolments at once, default 50)]
//   [--join-rate R] [--join-seconds S] [--streams-per-connection K]
// FLEET_CONTROLLER_NODE_ARGS: node flags for the controller (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
import { chmodSync, closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fork, spawn } from 'node:child_process';
import { connectAdmin } from '../../bin/dist/remote/admin.js';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';

const MESHP = new URL('../../bin/dist/main.js', import.meta.url).pathname;
// One 'exit' handler per controller, worker and temp folder (up to 8 workers and K replicas a size): not a leak.
process.setMaxListeners(0);
const WORKER = new URL('./worker.mjs', import.meta.url).pathname;
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
const WORKERS = flag('--workers');
const OPEN_WINDOW = Number(flag('--open-window') ?? 200);
const CONCURRENCY = Number(flag('--concurrency') ?? 50);
const JOIN_RATE = Number(flag('--join-rate') ?? 10);
const JOIN_SECONDS = Number(flag('--join-seconds') ?? 10);
const SHARE = Math.max(1, Number(flag('--streams-per-connection') ?? 1));
// --group 0: one group of all the agents (all-to-all); --json FILE: the rows, for fanout-floor.bench.mjs.
const GROUP_FLAG = flag('--group');
const JSON_OUT = flag('--json');
// --enrol-apart: the agents enrol under a policy where they see nobody (each enrolment then concerns
// no other agent), and one policy change gives the groups' rules before the streams open: without it
// an all-to-all enrolment is a join to all, O(N²) (7–19 agents/s at 1,000 on this machine).
// --light-agents: each simulated agent keeps a version, a hash and a count, not a view (worker.mjs).
const boolFlag = (name) => {
  const i = argv.indexOf(name);
  if (i >= 0) argv.splice(i, 1);
  return i >= 0;
};
const ENROL_APART = boolFlag('--enrol-apart');
const LIGHT = boolFlag('--light-agents');
if (REPLICAS > 1 && !STORE) throw new Error('--replicas needs --store postgres://… (replicas share one database)');
const sizes = (argv[0] ?? '200,1000').split(',').map(Number);
const fmt = (n, d = 1) => n.toLocaleString('en-US', { maximumFractionDigits: d });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** utime+stime of a process, in ms, and its RSS in KB, from /proc. */
function usageOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  return { cpuMs: ticks * 10, rssKb: rss };
}

/** Every controller started and every schema made, so that a failed run still stops and drops them. */
const started = [];
const schemas = new Set();

async function startController(state, store, nofile) {
  const nodeArgs = (process.env.FLEET_CONTROLLER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // Through a shell only to raise its open-file limit (exec: the pid is the controller's).
  const args = [
    ...nodeArgs,
    MESHP,
    'controller',
    'serve',
    '--state',
    state,
    '--listen',
    '127.0.0.1:0',
    ...(store ? ['--store', store] : []),
    ...(SHARE > 1 ? ['--streams-per-connection', String(SHARE)] : []),
  ];
  // Its log lines go to a file, as to a journal: a pipe this process read would push back on the
  // controller's synchronous log writes whenever this process is slow to read (a busy machine).
  mkdirSync(state, { recursive: true, mode: 0o700 });
  const logFile = join(state, 'controller.log');
  const out = openSync(logFile, 'a');
  const child = spawn('/bin/sh', ['-c', `ulimit -n ${nofile} 2>/dev/null || ulimit -n hard 2>/dev/null; exec "$0" "$@"`, process.execPath, ...args], {
    stdio: ['ignore', out, 'pipe'],
  });
  closeSync(out);
  child.stderr.resume();
  started.push(child);
  // The controller goes with the bench, however it ends (a timeout, ^C).
  process.once('exit', () => child.kill('SIGKILL'));
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => process.exit(130));
  let exited = null;
  child.once('exit', (c) => (exited = c));
  let serving;
  while (!serving) {
    if (exited !== null) throw new Error(`controller exited ${exited}`);
    await sleep(100);
    for (const l of readFileSync(logFile, 'utf8').split('\n')) {
      try {
        const o = JSON.parse(l);
        if (o.msg === 'controller serving') serving = o;
      } catch {
        // not a (whole) log line
      }
    }
  }
  const limit = /Max open files\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/limits`, 'utf8'))?.[1];
  return { child, address: String(serving.address), fingerprint: String(serving.fingerprint), nofile: Number(limit) };
}

/** A worker process (worker.mjs) and a call to it: a promise of its answer. */
function startWorker(onProgress) {
  const child = fork(WORKER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  process.once('exit', () => child.kill('SIGKILL'));
  const waiting = new Map();
  let next = 0;
  child.on('message', (m) => {
    if (m.id === undefined) return onProgress(m);
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.r);
    else w.reject(new Error(`worker ${child.pid}: ${m.error}`));
  });
  child.once('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`worker ${child.pid} exited ${code}`));
    waiting.clear();
  });
  const call = (cmd, args = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      child.send({ id, cmd, ...args });
    });
  return { child, call };
}

/** Every node, a page at a time (at 50,000 the whole list is over one message's limit). */
async function allNodes(admin, network) {
  const all = [];
  let pageToken = '';
  do {
    const r = await admin.call('listNodes', { network, pageSize: 1000, pageToken });
    all.push(...r.nodes);
    pageToken = r.nextPageToken;
  } while (pageToken);
  return all;
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
  const drop = async () => {
    schemas.delete(drop);
    const d = new pg.Client({ connectionString: url });
    await d.connect();
    await d.query(`DROP SCHEMA ${name} CASCADE`);
    await d.end();
  };
  schemas.add(drop);
  return { url: `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${name}`)}`, drop };
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
  const GROUP = GROUP_FLAG === undefined ? 50 : Number(GROUP_FLAG) || n;
  const dir = mkdtempSync(join(tmpdir(), 'meshp-fleet-'));
  // Also when a run fails (after the controllers are killed: their 'exit' handlers come first).
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const schema = STORE ? await schemaFor(STORE, n) : null;
  // Raised, never lowered below this process's own.
  const own = Number(/Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 0);
  const nofile = Math.max(own, 2 * Math.ceil(n / SHARE) + 1000);
  const ctls = [await startController(join(dir, 'ctl0'), schema?.url, nofile)];
  for (let k = 1; k < REPLICAS; k++) {
    replicaState(join(dir, 'ctl0'), join(dir, `ctl${k}`));
    ctls.push(await startController(join(dir, `ctl${k}`), schema?.url, nofile));
  }
  if (ctls.some((c) => c.nofile < n / SHARE + 100))
    console.error(`[N=${n}] the controller's open-file limit is ${ctls.map((c) => c.nofile).join(', ')}: fewer than one per agent`);
  const admins = await Promise.all(ctls.map((_, k) => connectAdmin({ state: join(dir, `ctl${k}`) })));
  const admin = admins[0];
  /** CPU and RSS of every replica, summed. */
  const usage = () => ctls.map((c) => usageOf(c.child.pid)).reduce((a, b) => ({ cpuMs: a.cpuMs + b.cpuMs, rssKb: a.rssKb + b.rssKb }));
  const network = 'default';
  const groups = Math.ceil(n / GROUP);
  const rules = Array.from({ length: groups }, (_, g) => ({ fromTag: `g${g}`, toTag: `g${g}`, ports: [] }));
  await admin.call('setPolicy', { network, rules: ENROL_APART ? [] : rules });

  // The agents, round-robin over the workers (a0, the one removed, and the late joiner on worker 0).
  const nWorkers = Math.max(1, Math.min(n, Number(WORKERS ?? Math.min(8, Math.ceil(n / 2500)))));
  let enrolled = 0;
  const marks = [];
  let t0 = 0;
  const workers = Array.from({ length: nWorkers }, () =>
    startWorker((m) => {
      if (!m.enrolled) return;
      enrolled += m.enrolled;
      if (enrolled % 1000 === 0) {
        marks.push(now());
        console.error(`[N=${n}] ${enrolled} enrolled after ${fmt((now() - t0) / 1000)} s (load ${load()})`);
      }
    }),
  );
  const simUsage = () => workers.map((w) => usageOf(w.child.pid)).reduce((a, b) => ({ cpuMs: a.cpuMs + b.cpuMs, rssKb: a.rssKb + b.rssKb }));
  const all = (cmd, args) => Promise.all(workers.map((w) => w.call(cmd, args)));
  const counts = async () => {
    const cs = await all('counts');
    const out = { agents: 0, snapshotted: 0, acked: 0, deltas: 0, bytes: 0, opens: 0, ends: {} };
    for (const c of cs) {
      for (const k of ['agents', 'snapshotted', 'acked', 'deltas', 'bytes', 'opens']) out[k] += c[k];
      for (const [k, v] of Object.entries(c.ends)) out.ends[k] = (out.ends[k] ?? 0) + v;
    }
    return out;
  };
  const ctlRefs = ctls.map((c) => ({ address: c.address, fingerprint: c.fingerprint }));
  await Promise.all(
    workers.map((w, k) => {
      const plan = [];
      for (let i = k; i < n; i += nWorkers) plan.push({ name: `a${i}`, ctl: i % ctls.length, tag: `g${i % groups}` });
      return w.call('init', { plan, ctls: ctlRefs, network, adminState: join(dir, 'ctl0'), share: SHARE, light: LIGHT });
    }),
  );
  const idle = usage();

  // Enrolment: one token each (single-use), CONCURRENCY at a time over all workers.
  const perWorker = (x) => Math.max(1, Math.round(x / nWorkers));
  let sim0 = simUsage();
  t0 = now();
  const ctlEnrol0 = usage();
  await all('enrol', { concurrency: perWorker(CONCURRENCY) });
  const enrolS = (now() - t0) / 1000;
  const enrolLoad = load();
  const simEnrol = simUsage().cpuMs - sim0.cpuMs;
  const ctlEnrol = usage().cpuMs - ctlEnrol0.cpuMs;
  const firstK = marks.length ? (marks[0] - t0) / 1000 : NaN;
  const lastK = marks.length >= 2 ? (marks.at(-1) - marks.at(-2)) / 1000 : NaN;
  console.error(`[N=${n}] enrolled ${n} in ${fmt(enrolS)} s (${fmt(n / enrolS)}/s) over ${nWorkers} worker(s); load ${enrolLoad}`);
  // The groups' rules, once every agent is enrolled apart (no stream open yet: each view is sent as the snapshot below).
  let apart = null;
  if (ENROL_APART) {
    const c0 = usage();
    const t = now();
    // Its own admin client with a long deadline: at 5,000 all-to-all the change is 25 million pairs
    // of reach computed at once (3.7 s at 1,000), over the CLI's 15 s.
    const cred = readAdminCredential(join(dir, 'ctl0', ADMIN_CREDENTIAL_FILE));
    const slow = await AdminClient.connect({ address: ctls[0].address, fingerprint: cred.fingerprint, credential: cred.secret, deadlineMs: 1_800_000 });
    await slow.call('setPolicy', { network, rules });
    slow.close();
    apart = { ms: now() - t, cpuMs: usage().cpuMs - c0.cpuMs, load: load() };
    console.error(`[N=${n}] the groups' policy set in ${fmt(apart.ms, 0)} ms (controller ${fmt(apart.cpuMs, 0)} ms CPU); load ${apart.load}`);
  }

  // Streams opened, at most OPEN_WINDOW waiting for their snapshot; snapshots received.
  sim0 = simUsage();
  const ctlSnap0 = usage();
  t0 = now();
  const opening = all('open', { window: perWorker(OPEN_WINDOW) });
  opening.catch(() => undefined);
  for (let last = -1, still = 0; ;) {
    await sleep(500);
    const c = await counts();
    if (c.snapshotted >= n) break;
    still = c.snapshotted === last ? still + 1 : 0;
    last = c.snapshotted;
    if (still > 0 && still % 20 === 0) console.error(`waiting: ${c.snapshotted} of ${n} snapshotted; stream ends so far: ${JSON.stringify(c.ends)}`);
  }
  await opening;
  const snapS = (now() - t0) / 1000;
  const snapLoad = load();
  const simSnap = simUsage().cpuMs - sim0.cpuMs;
  const ctlSnap = usage().cpuMs - ctlSnap0.cpuMs;
  console.error(`[N=${n}] ${n} streams opened and snapshotted in ${fmt(snapS)} s; load ${snapLoad}`);
  await sleep(1000);
  const held = usage();
  // The controllers' open files with every stream open: about one socket per agent, or per K with --streams-per-connection.
  const openFiles = ctls.reduce((sum, c) => sum + readdirSync(`/proc/${c.child.pid}/fd`).length, 0);
  const simHeld = simUsage();

  // The controller's CPU while nothing changes (keepalives, timers, the group commit), per ms: a
  // change's window lasts seconds (the settle below), so its CPU is given net of this.
  const idle0 = usage();
  const idleStart = now();
  await sleep(3000);
  const idleRate = (usage().cpuMs - idle0.cpuMs) / (now() - idleStart);

  const rows = [];
  const change = async (name, act) => {
    await all('clearAcks');
    const before = usage();
    const windowStart = now();
    // The window on CLOCK_MONOTONIC (µs), the clock a V8 CPU profile's timestamps are on (--profile).
    const monoStartUs = Number(process.hrtime.bigint() / 1000n);
    const c0 = await counts();
    const start = now();
    await act();
    // settle: no new ack for 1 s
    let last = -1;
    let c1;
    for (;;) {
      await sleep(1000);
      c1 = await counts();
      if (c1.acked === last) break;
      last = c1.acked;
    }
    const after = usage();
    const windowMs = now() - windowStart;
    const monoEndUs = Number(process.hrtime.bigint() / 1000n);
    const times = (await all('ackTimes')).flat().map((t) => t - start);
    // Each replica knows exactly the gaps of the agents connected to it.
    let gaps = 0;
    for (const a of admins) {
      const nodes = await allNodes(a, network);
      gaps += nodes.filter((x) => (admins.length === 1 || x.connected) && Number(x.gap ?? 0) !== 0).length;
    }
    rows.push({
      name,
      bytes: c1.bytes - c0.bytes,
      messages: c1.deltas - c0.deltas,
      acked: times.length,
      cpuMs: after.cpuMs - before.cpuMs,
      netMs: after.cpuMs - before.cpuMs - idleRate * windowMs,
      windowMs,
      p50: pct(times, 50),
      p99: pct(times, 99),
      max: Math.max(0, ...times),
      gaps,
      load: load(),
      monoStartUs,
      monoEndUs,
    });
  };

  await change('join', async () => {
    const { token } = await admin.call('createToken', { network, mode: 2, ttlSeconds: 3600, tags: ['g0'] });
    await workers[0].call('late', { name: 'late', token });
  });
  // All-to-all (--group 0): the join alone (a policy change there rewrites every agent's whole view).
  if (GROUP_FLAG === undefined)
    await change('policy change', () => admin.call('setPolicy', { network, rules: rules.map((r, g) => (g === 0 ? { ...r, ports: ['443'] } : r)) }));
  if (GROUP_FLAG === undefined) await change('removal', () => admin.call('removeNode', { network, node: 'a0' }));

  // Joins at JOIN_RATE a second, each into the next group (not g0, whose rule changed above).
  const total = Math.round(JOIN_RATE * JOIN_SECONDS);
  const joinTags = Array.from({ length: total }, (_, i) => `g${groups > 1 ? 1 + (i % (groups - 1)) : 0}`);
  const joinTokens = [];
  for (const tag of joinTags) joinTokens.push((await admin.call('createToken', { network, mode: 2, ttlSeconds: 3600, tags: [tag] })).token);
  await all('clearAcks');
  let joinRow;
  {
    const before = usage();
    const start = now();
    const calls = [];
    for (let i = 0; i < total; i++) {
      await sleep(start + (i * 1000) / JOIN_RATE - now());
      const name = `j${i}`;
      const tag = joinTags[i];
      calls.push(
        workers[i % nWorkers].call('late', { name, token: joinTokens[i], tag, ctl: i % ctls.length }).then((r) => ({ ...r, name, tag, worker: i % nWorkers })),
      );
    }
    // The rate the joins were asked at (the last one asked at start + (total - 1) / rate).
    const rate = total > 1 ? (total - 1) / ((now() - start) / 1000) : JOIN_RATE;
    const joins = await Promise.all(calls);
    // settle: every joiner has its snapshot and no new ack for 1 s
    for (let last = -1; ;) {
      await sleep(1000);
      const c = await counts();
      if (c.acked === last && c.snapshotted >= c.agents) break;
      last = c.acked;
    }
    const after = usage();
    const windowMs = now() - start;
    const reports = await all('joinReport', { joins: joins.map(({ name, node, tag, start: s }) => ({ name, node, tag, start: s })) });
    const lat = [];
    const own = [];
    let missing = 0;
    let ownMissing = 0;
    for (const perWorker of reports) {
      perWorker.forEach((r) => {
        lat.push(...r.lat);
        missing += r.missing;
        if (r.own === null) ownMissing++;
        else if (r.own !== undefined) own.push(r.own);
      });
    }
    const answered = joins.map((j) => j.answered - j.start);
    let gaps = 0;
    for (const a of admins) {
      const nodes = await allNodes(a, network);
      gaps += nodes.filter((x) => (admins.length === 1 || x.connected) && Number(x.gap ?? 0) !== 0).length;
    }
    const every = [...lat, ...own];
    joinRow = {
      total,
      rate,
      lat,
      own,
      every,
      missing,
      ownMissing,
      answered,
      gaps,
      cpuMs: after.cpuMs - before.cpuMs,
      netMs: after.cpuMs - before.cpuMs - idleRate * windowMs,
      windowMs,
      load: load(),
    };
  }
  const end = await counts();
  if (JSON_OUT)
    writeFileSync(
      JSON_OUT,
      JSON.stringify({
        n,
        group: GROUP,
        rows,
        rssKbPerAgent: (held.rssKb - idle.rssKb) / n,
        rssKb: held.rssKb,
        idleRate,
        enrolPerS: n / enrolS,
        snapS,
        apart,
        join: { ...joinRow, lat: undefined, own: undefined, every: undefined },
      }),
    );

  console.log(
    `\nN = ${fmt(n)} agents in groups of ${GROUP}${SHARE > 1 ? `, ${SHARE} agents' streams to a TLS connection` : ''}; ${STORE ? `PostgreSQL, ${ctls.length} replica(s)` : 'SQLite'}; controller pid ${ctls.map((c) => c.child.pid).join(', ')} (open-file limit ${ctls.map((c) => c.nofile).join(', ')}); ${nWorkers} simulator process(es)`,
  );
  console.log(
    `enrolment: ${fmt(n / enrolS)}/s (${fmt(enrolS)} s${marks.length >= 2 ? `; first 1,000 in ${fmt(firstK)} s, last 1,000 in ${fmt(lastK)} s` : ''}), load ${enrolLoad}`,
  );
  if (apart)
    console.log(
      `enrolled apart (a policy where agents see nobody), then the groups' rules set in ${fmt(apart.ms, 0)} ms (controller ${fmt(apart.cpuMs, 0)} ms CPU), load ${apart.load}`,
    );
  console.log(
    `${fmt(n)} streams opened and snapshotted in ${fmt(snapS)} s (at most ${fmt(perWorker(OPEN_WINDOW) * nWorkers)} waiting at once), load ${snapLoad}`,
  );
  console.log(
    `controller while enrolling and snapshotting: ${fmt((held.cpuMs - idle.cpuMs) / n, 2)} ms CPU per agent; RSS ${fmt((held.rssKb - idle.rssKb) / n)} KB per agent (${fmt(held.rssKb / 1024)} MB); ${fmt(openFiles)} open files; busy ${fmt(ctlEnrol / 10 / enrolS, 0)}% of a core enrolling, ${fmt(ctlSnap / 10 / snapS, 0)}% snapshotting`,
  );
  console.log(
    `simulator: ${fmt(simEnrol / 1000)} s CPU enrolling (${fmt(simEnrol / 10 / enrolS, 0)}% of a core), ${fmt(simSnap / 1000)} s snapshotting (${fmt(simSnap / 10 / snapS, 0)}%); RSS ${fmt(simHeld.rssKb / 1024)} MB`,
  );
  console.log(
    `controller idle (no change): ${fmt(idleRate * 1000)} ms CPU a second; 'ctl cpu ms' below is a change's window net of it (the whole window in brackets, and its length; '<10': below what /proc's 10 ms ticks and the idle estimate can tell)`,
  );
  console.log('change          msgs    bytes  acked  ctl cpu ms (window)      gap-0 p50   p99    max ms  gaps≠0 | full-state msgs  ratio | load');
  for (const r of rows) {
    console.log(
      [
        r.name.padEnd(14),
        fmt(r.messages).padStart(5),
        fmt(r.bytes).padStart(8),
        fmt(r.acked).padStart(6),
        (r.netMs >= 10 ? fmt(r.netMs, 0) : '<10').padStart(11),
        `(${fmt(r.cpuMs)} in ${fmt(r.windowMs / 1000)} s)`.padEnd(16),
        fmt(r.p50, 0).padStart(11),
        fmt(r.p99, 0).padStart(5),
        fmt(r.max, 0).padStart(9),
        String(r.gaps).padStart(7),
        '|',
        fmt(end.agents).padStart(15),
        `${fmt(end.agents / Math.max(1, r.messages))}x`.padStart(6),
        '|',
        r.load,
      ].join(' '),
    );
  }
  {
    const j = joinRow;
    const q = (xs) => `${fmt(pct(xs, 50), 0)} / ${fmt(pct(xs, 99), 0)} / ${fmt(Math.max(0, ...xs), 0)} ms`;
    console.log(`joins at ${fmt(j.rate)}/s (${j.total} in ${fmt(JOIN_SECONDS)} s, each into a group of ${GROUP}), load ${j.load}:`);
    console.log(`  Enrol answered p50 / p99 / max: ${q(j.answered)}`);
    console.log(
      `  each group's agents applied the delta bringing the join and sent their ack, over ${fmt(j.lat.length)} agent-joins: p50 / p99 / max ${q(j.lat)}; never: ${j.missing}`,
    );
    console.log(`  the joiner's own snapshot: ${q(j.own)}; never: ${j.ownMissing}`);
    console.log(
      `  both, as the agents saw them: p99 ${fmt(pct(j.every, 99), 0)} ms (goal: every gap 0 within 2,000 ms); nodes not at gap 0 after, as the controller reads them: ${j.gaps}`,
    );
    console.log(`  controller CPU net of idle: ${fmt(j.netMs / j.total, 1)} ms a join (${fmt(j.cpuMs)} ms in ${fmt(j.windowMs / 1000)} s in all)`);
  }
  const e = Object.entries(end.ends);
  console.log(`streams opened ${fmt(end.opens)} for ${fmt(end.agents)} agents; ended: ${e.length ? JSON.stringify(end.ends) : 'none'}`);
  await all('close').catch(() => undefined);
  for (const w of workers) if (w.child.exitCode === null) await new Promise((r) => w.child.once('exit', r));
  for (const a of admins) a.close();
  for (const c of ctls) {
    c.child.kill('SIGTERM');
    await new Promise((r) => c.child.once('exit', r));
  }
  await schema?.drop();
  rmSync(dir, { recursive: true, force: true });
}

try {
  for (const n of sizes) await run(n);
} catch (e) {
  // A failed run leaves nothing behind: its controllers stopped first (they hold the schema), then its schema dropped.
  console.error(e);
  for (const c of started) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    c.kill('SIGKILL');
    await new Promise((r) => c.once('exit', r));
  }
  for (const drop of schemas) await drop().catch((err) => console.error(`the bench's schema could not be dropped: ${err.message}`));
  process.exit(1);
}
process.exit(0);
