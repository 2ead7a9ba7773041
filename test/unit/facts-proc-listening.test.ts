/**
 * facts-proc names the process holding each listening socket, read from this machine's /proc. An
 * owner is remembered by socket inode between reads (a whole-machine fd scan costs one readlink per
 * open fd); these tests check the remembered answer stays true when the socket changes hands.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type Server } from 'node:net';
import { listening } from '@meshp/facts-proc';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '../..');

const listen = (s: Server): Promise<number> => new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve((s.address() as { port: number }).port)));
const close = (s: Server): Promise<void> => new Promise((resolve) => s.close(() => resolve()));
const holder = async (port: number) => (await listening()).find((l) => l.protocol === 'tcp' && l.port === port && l.address === '127.0.0.1');

t.test('a socket of this process, then gone', async (t) => {
  const s = createServer();
  const port = await listen(s);
  const first = await holder(port);
  t.equal(first?.pid, process.pid, 'named by this pid');
  t.equal(first?.process, 'node');
  t.equal((await holder(port))?.pid, process.pid, 'read again (the remembered owner re-checked): the same');
  await close(s);
  t.equal(await holder(port), undefined, 'closed: no longer listed');
});

/**
 * In a network namespace of its own (nothing else listens there, so no other new socket sends the
 * reader back to a whole-machine scan): a socket handed to another process, the first holder lets go,
 * and one read must name the new holder, not the remembered one.
 */
const HANDOVER = `
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { listening } from '@meshp/facts-proc';
const holder = async (port) => (await listening()).find((l) => l.protocol === 'tcp' && l.port === port);
const child = spawn(process.execPath, ['-e', "process.on('message', (m, s) => { s.on('connection', () => {}); process.send('taken'); })"], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
const s = createServer();
await new Promise((r) => s.listen(0, '127.0.0.1', r));
const port = s.address().port;
const before = await holder(port);
const again = await holder(port);
const taken = new Promise((r) => child.once('message', r));
child.send('take', s);
await taken;
await new Promise((r) => s.close(r));
const after = await holder(port);
child.kill('SIGKILL');
console.log(JSON.stringify({ me: process.pid, child: child.pid, before: before?.pid, again: again?.pid, after: after?.pid, process: after?.process }));
`;

t.test('a socket handed to another process: the new holder is named, not the remembered one', async (t) => {
  const r = spawnSync('unshare', ['--net', process.execPath, '--input-type=module', '-e', HANDOVER], { encoding: 'utf8', cwd: REPO });
  t.equal(r.status, 0, r.stderr);
  const seen = JSON.parse(r.stdout) as { me: number; child: number; before: number; again: number; after: number; process: string };
  t.equal(seen.before, seen.me, 'first held by the process that opened it');
  t.equal(seen.again, seen.me, 'read again (the remembered owner re-checked in that one process): the same');
  t.equal(seen.after, seen.child, `after the hand-over: the child (${seen.child}), not the remembered ${seen.me}`);
  t.equal(seen.process, 'node');
});
