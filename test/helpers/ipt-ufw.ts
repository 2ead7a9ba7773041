/**
 * A lab bed for the ufw example: real ufw, confined. Every ufw command runs inside the server's
 * network namespace AND a private mount namespace where /etc/ufw, /lib/ufw, /etc/default/ufw and
 * /run are this test's own copies, so the machine's ufw state is never read or written.
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localRunner, type CommandRunner } from '@meshp/firewall-iptables';
import { netns, runPrefix, wire, type Netns, type Teardownable } from './netns.js';
import { ADDR, httpd, reaper } from './ipt-lab.js';

export interface UfwBed {
  server: Netns;
  client: Netns;
  outside: Netns;
  /** The confined copy of /etc/ufw etc. */
  dir: string;
  runner: CommandRunner;
  ufw(...args: string[]): Promise<string>;
  /** Hash of this bed's /etc/ufw copy. */
  configHash(): Promise<string>;
}

const MARKER = '.meshp-lab-copy';

/** A digest of the machine's own ufw state, to prove a test never touched it. */
export async function machineUfwHash(): Promise<string> {
  const h = createHash('sha256');
  for (const f of ['/etc/ufw/ufw.conf', '/etc/ufw/user.rules', '/etc/ufw/user6.rules', '/etc/ufw/before.rules', '/etc/default/ufw']) {
    h.update(f);
    h.update(await readFile(f).catch(() => Buffer.from('absent')));
  }
  return h.digest('hex');
}

export async function ufwBed(t: Teardownable): Promise<UfwBed> {
  const p = runPrefix('iq');
  const server = await netns(t, `${p}s`);
  const client = await netns(t, `${p}c`);
  const outside = await netns(t, `${p}o`);
  await wire(server, `${ADDR.server}/24`, client, `${ADDR.client}/24`, `${p}1`);
  await wire(server, `${ADDR.serverOut}/24`, outside, `${ADDR.outside}/24`, `${p}2`);

  const dir = await mkdtemp(join(tmpdir(), `${p}-ufw-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'etc'), { recursive: true });
  await mkdir(join(dir, 'lib'), { recursive: true });
  await mkdir(join(dir, 'default'), { recursive: true });
  await mkdir(join(dir, 'www'), { recursive: true });
  await writeFile(join(dir, 'www/index.html'), 'lab\n');
  await cp('/etc/ufw', join(dir, 'etc/ufw'), { recursive: true });
  await cp('/lib/ufw', join(dir, 'lib/ufw'), { recursive: true });
  await cp('/etc/default/ufw', join(dir, 'default/ufw'));
  // ufw disabled, no sysctl changes. The rule files start as the machine's (Debian ships them without rules).
  await writeFile(join(dir, 'etc/ufw/ufw.conf'), 'ENABLED=no\nLOGLEVEL=off\n');
  await writeFile(join(dir, 'etc/ufw/sysctl.conf'), '');
  await writeFile(join(dir, 'etc/ufw', MARKER), 'yes\n');
  const script = join(dir, 'confine.sh');
  await writeFile(
    script,
    [
      '#!/bin/sh',
      `mount --bind ${dir}/etc/ufw /etc/ufw || exit 99`,
      `mount --bind ${dir}/lib/ufw /lib/ufw || exit 99`,
      `mount --bind ${dir}/default/ufw /etc/default/ufw || exit 99`,
      'mount -t tmpfs tmpfs /run || exit 99',
      `test -f /etc/ufw/${MARKER} || exit 99`,
      'exec "$@"',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  const runner = localRunner(['nsenter', `--net=${server.path}`, '--', 'unshare', '--mount', '--propagation', 'private', '--', script]);
  // Refuse to go on unless the confinement holds: the marker exists only in our copy.
  const check = await runner('cat', [`/etc/ufw/${MARKER}`]);
  if (check.code !== 0 || check.stdout.trim() !== 'yes') throw new Error(`ufw confinement failed: ${check.stderr}`);

  const ufw = async (...args: string[]) => {
    const r = await runner('ufw', args);
    if (r.code !== 0) throw new Error(`ufw ${args.join(' ')}: ${r.stderr || r.stdout}`);
    return r.stdout;
  };
  const children = reaper(t);
  children.push(await httpd(server, 8080, join(dir, 'www')));
  children.push(await httpd(server, 9090, join(dir, 'www')));
  return {
    server,
    client,
    outside,
    dir,
    runner,
    ufw,
    async configHash() {
      const h = createHash('sha256');
      for (const f of ['ufw.conf', 'user.rules', 'user6.rules', 'before.rules', 'after.rules']) h.update(await readFile(join(dir, 'etc/ufw', f)).catch(() => Buffer.from('absent')));
      return h.digest('hex');
    },
  };
}
