/**
 * Case 5 of issue 13 over real gRPC on 127.0.0.1: a node that declares endpoints over their bound
 * is refused at enrolment with a code (and its token is not burnt), and the nodes within bounds
 * converge as before: no snapshot ever grows past the message limit.
 */
import t from 'tap';
import { join } from 'node:path';
import { Proc, createToken, nodeList, startAgent, startController, waitUntil, workdir } from '../helpers/grpc-procs.js';

const bloated = Array.from({ length: 40 }, (_, i) => `${'endpoint-'.repeat(20)}${i}.example:51820`);

t.test('endpoint bloat is refused at enrolment; the others converge', async (t) => {
  const dir = workdir(t, 'limits');
  const ctl = await startController(t, join(dir, 'ctl'));
  const token = createToken(ctl, '--adopted');
  const base = join(dir, 'bloat');
  const args = ['agent', '--state', join(base, 'state'), '--controller', ctl.address, '--name', 'bloat', '--root', join(base, 'root'),
    '--firewall', 'none', '--docker-socket', join(base, 'absent.sock'), '--interval', '1', '--token', token, ...bloated.flatMap((e) => ['--endpoint', e])];
  const bloat = new Proc(t, args);
  const code = await Promise.race([bloat.exited, new Promise<string>((r) => setTimeout(() => r('still running'), 30_000))]);
  t.equal(code, 1, 'the agent stops with a refusal');
  t.match(bloat.stderr + JSON.stringify(bloat.lines), /MESHP_INPUT_TOO_LARGE: 40 endpoints are over the limit of 32/);
  t.same(nodeList(ctl).map((n) => n.name), [], 'nothing joined');
  const logged = await ctl.proc.waitFor((l) => l.msg === 'enrolment refused');
  t.equal(logged.code, 'MESHP_INPUT_TOO_LARGE', 'the controller logs the refusal with its code');

  // The same token still enrols a node within bounds, and a second node joins it; both converge.
  const a1 = startAgent(t, dir, 'a1', ctl.address, token);
  const a2 = startAgent(t, dir, 'a2', ctl.address, createToken(ctl));
  for (const a of [a1, a2]) await a.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true);
  await waitUntil('both nodes at gap 0', () => {
    const nodes = nodeList(ctl);
    return nodes.length === 2 && nodes.every((n) => n.gap === 0);
  });
  t.notOk(ctl.proc.lines.some((l) => l.msg === 'delta not sent: over the message limit'), 'no delta held back');
});
