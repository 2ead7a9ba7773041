/**
 * The systemd units in examples/systemd as systemd itself scores them (`systemd-analyze security
 * --offline`): the controller runs unprivileged with no capabilities; the agent as root, bounded to
 * the capabilities its work needs; neither puts a token on the command line.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const DIR = join(process.cwd(), 'examples/systemd');

function exposure(unit: string): number {
  const r = spawnSync('systemd-analyze', ['security', '--offline=true', '--no-pager', join(DIR, unit)], { encoding: 'utf8' });
  const m = /Overall exposure level for \S+: (\d+\.\d+)/.exec(r.stdout);
  if (!m) throw new Error(`systemd-analyze said: ${r.stdout}${r.stderr}`);
  return Number(m[1]);
}

t.test('the controller unit scores 2.0 or less: a dynamic user, no capabilities', async (t) => {
  const score = exposure('meshp-controller.service');
  t.ok(score <= 2.0, `exposure ${score}`);
  const text = readFileSync(join(DIR, 'meshp-controller.service'), 'utf8');
  t.match(text, /^DynamicUser=yes$/m, 'not root');
  t.match(text, /^CapabilityBoundingSet=$/m);
});

t.test('the agent unit scores 5.0 or less: root, its capabilities bounded; the token comes from the environment', async (t) => {
  const score = exposure('meshp-agent.service');
  t.ok(score <= 5.0, `exposure ${score}`);
  const text = readFileSync(join(DIR, 'meshp-agent.service'), 'utf8');
  t.match(text, /^CapabilityBoundingSet=CAP_NET_ADMIN /m);
  t.notMatch(text.split('\n').find((l) => l.startsWith('ExecStart=')) ?? '', /--token/, 'no token in argv');
});
