// Issue 31's fleet goal in `make bench`: the fleet simulator's joins at 10 a second in groups of 50,
// at N = 50,000 agents on 100 streams a connection (bench/fleet/fleet.bench.mjs; its output says
// the goal: every gap 0 within 2 s p99). About 12 minutes on a 2-core machine, most of it the
// enrolment of 50,000 agents. FLEET_N gives another size (a quick look: FLEET_N=5000).
// Run: npx tsc -b && node bench/fleet-joins.bench.mjs   (ulimit -n of 2N + 1,000 or more)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const n = process.env.FLEET_N ?? '50000';
const fleet = fileURLToPath(new URL('./fleet/fleet.bench.mjs', import.meta.url));
const args = [fleet, n, '--streams-per-connection', '100', '--join-rate', '10', '--join-seconds', '10'];
console.log(`node ${args.map((a) => (a === fleet ? 'bench/fleet/fleet.bench.mjs' : a)).join(' ')}`);
const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
process.exitCode = r.status ?? 1;
