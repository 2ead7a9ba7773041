/**
 * Case 6 of issue 13: a process name set with prctl(PR_SET_NAME) by any local user carries escape
 * sequences; a real agent reports it, and the real CLI shows it to the operator (doctor) without
 * a single control character, while --json keeps it exact.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { meshp, startAgent, startController, waitUntil, workdir, createToken } from '../helpers/grpc-procs.js';

// OSC "set the window title" then BEL, then CSI "erase the screen": 12 bytes, under the 15 of a comm.
const NAME = '\u001b]0;PWN\u0007\u001b[2J';
const LISTENER = `
import ctypes, socket, sys
ctypes.CDLL(None).prctl(15, ${JSON.stringify(NAME)}.encode(), 0, 0, 0)
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()
`;

t.test('doctor shows a hostile process name inert; --json keeps it exact', async (t) => {
  const py = spawn('python3', ['-c', LISTENER], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => py.pid !== undefined && py.exitCode === null && process.kill(py.pid, 'SIGKILL'));
  const port = await new Promise<number>((res) => py.stdout.once('data', (d: Buffer) => res(Number(d.toString().trim()))));
  t.ok(port > 0, `a listener named with escapes on 127.0.0.1:${port}`);

  const dir = workdir(t, 'controls');
  const ctl = await startController(t, join(dir, 'ctl'));
  const agent = startAgent(t, dir, 'a1', ctl.address, createToken(ctl, '--adopted'));
  await agent.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true);
  const json = await waitUntil(
    'the agent reported the listener',
    () => {
      const r = meshp('doctor', 'a1', '--state', ctl.state, '--controller', ctl.address, '--json');
      if (r.code !== 0) return false;
      const doc = JSON.parse(r.out) as { listening: { port: number; process: string }[] };
      return doc.listening.find((l) => l.port === port);
    },
    40_000,
  );
  t.equal(json.process, NAME, '--json: the name exactly as reported');

  const human = meshp('doctor', 'a1', '--state', ctl.state, '--controller', ctl.address);
  t.equal(human.code, 0, human.err);
  // eslint-disable-next-line no-control-regex
  t.notMatch(human.out, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, 'no control character reaches the terminal');
  t.match(human.out, `127.0.0.1:${port} \\u001b]0;PWN\\u0007\\u001b[2J`, 'the name is shown, inert');
});
