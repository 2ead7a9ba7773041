/**
 * A test file's stand-in for test/unit/netns-sweep.test.ts: makes a namespace through netns(), starts
 * a detached process in it (as wireguard-go and dockerd are), says so on stdout, and waits for a signal.
 */
import { spawn } from 'node:child_process';
import { netns } from './netns.js';

const name = process.argv[2]!;
const ns = await netns({ teardown: () => undefined }, name);
const [cmd, args] = ns.wrap('sleep', ['600']);
const child = spawn(cmd, args, { detached: true, stdio: 'ignore' });
child.unref();
process.stdout.write(`${JSON.stringify({ name, pid: child.pid })}\n`);
setInterval(() => undefined, 1_000);
