/**
 * `controller serve --log-depth N` holds for the networks already in the state, not only for those
 * made from then on: a real controller process restarted on the same state.
 */
import t from 'tap';
import { join } from 'node:path';
import { meshp, startController, workdir } from '../helpers/grpc-procs.js';

t.test('--log-depth on a restart sets the depth of the networks already there, once', async (t) => {
  const state = join(workdir(t, 'logdepth'), 'ctl');
  let ctl = await startController(t, state);
  t.notOk(
    ctl.proc.lines.some((l) => l.msg === 'log depth set'),
    'first start: the default, nothing to set',
  );
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;

  ctl = await startController(t, state, ['--log-depth', '2']);
  const set = ctl.proc.lines.find((l) => l.msg === 'log depth set');
  t.match(set, { network: 'default', from: 1000, to: 2 }, 'the existing network now keeps 2 changes');
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;

  ctl = await startController(t, state, ['--log-depth', '2']);
  t.notOk(
    ctl.proc.lines.some((l) => l.msg === 'log depth set'),
    'the same depth again: nothing to set',
  );
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;

  const bad = meshp('controller', 'serve', '--state', state, '--listen', '127.0.0.1:0', '--log-depth', '0');
  t.not(bad.code, 0, 'a depth of 0 is refused');
  t.match(bad.err, /MESHP_USAGE.*--log-depth 0/);
});
