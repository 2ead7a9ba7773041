/**
 * SyncPg's wait for the database thread (store-postgres sync-pg.ts): only the flag the thread sets
 * once its answer is on the port ends the wait. A notify that comes while the flag is still 0 (the
 * thread's notify for the batch before, descheduled between its store and its notify) does not.
 * No PostgreSQL needed: the thread here is a stand-in that notifies early, then answers.
 */
import t from 'tap';
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { waitForAnswer } from '@meshp/store-postgres';

// The stand-in: notifies until a waiter was woken with the flag still 0, pauses, then posts its
// answer, sets the flag and notifies, as worker.ts does.
const STAND_IN = `
const { workerData } = require('node:worker_threads');
const { flag, port } = workerData;
while (Atomics.notify(flag, 0, 1) === 0);
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
port.postMessage('the answer');
Atomics.store(flag, 0, 1);
Atomics.notify(flag, 0);
`;

t.test('a wake with the flag still 0 is not an answer: the wait goes on until the flag is set', async (t) => {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new MessageChannel();
  const w = new Worker(STAND_IN, { eval: true, workerData: { flag, port: port2 }, transferList: [port2] });
  t.teardown(() => {
    port1.close();
    void w.terminate();
  });
  await new Promise((r) => w.once('online', r));
  t.equal(waitForAnswer(flag, 60_000), true, 'answered');
  t.equal(receiveMessageOnPort(port1)?.message, 'the answer', 'the answer is on the port when the wait ends');
});

t.test('no flag within the time: false (the database counts as gone)', async (t) => {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  t.equal(waitForAnswer(flag, 20), false);
});

t.test('a flag set before the wait begins: true at once', async (t) => {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  Atomics.store(flag, 0, 1);
  t.equal(waitForAnswer(flag, 60_000), true);
});
