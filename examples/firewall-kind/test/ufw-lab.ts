/**
 * Real ufw in the testkit's lab, confined: every command runs in the lab's server namespace AND a
 * private mount namespace where /etc/ufw, /lib/ufw, /etc/default/ufw are the copies under the lab's
 * root and /run is a tmpfs, so the machine's own ufw state is never read or written. A plugin
 * author whose firewall keeps its state in files confines it the same way.
 */
import { createHash } from 'node:crypto';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { localRunner, type CommandRunner } from '@meshp/firewall-iptables';
import type { KitLab } from '@meshp/testkit';

/** Present only in the lab's copy: ufw is not run unless the mount put it in place. */
const MARKER = '.meshp-lab-copy';
const MACHINE_FILES = ['/etc/ufw/ufw.conf', '/etc/ufw/user.rules', '/etc/ufw/user6.rules', '/etc/ufw/before.rules', '/etc/default/ufw'];

/** A digest of the machine's own ufw state, to prove a test never touched it. */
export async function machineUfwHash(): Promise<string> {
  const h = createHash('sha256');
  for (const f of MACHINE_FILES) {
    h.update(f);
    h.update(await readFile(f).catch(() => Buffer.from('absent')));
  }
  return h.digest('hex');
}

export interface UfwLab {
  runner: CommandRunner;
  ufw(...args: string[]): Promise<string>;
  /** A digest of the lab's /etc/ufw copy. */
  configHash(): Promise<string>;
}

/** Copies ufw's files under `lab.root`, ufw disabled and no sysctl changes, and a runner confined to them. */
export async function ufwLab(lab: KitLab): Promise<UfwLab> {
  const etc = join(lab.root, 'etc/ufw');
  await cp('/etc/ufw', etc, { recursive: true });
  await cp('/lib/ufw', join(lab.root, 'lib/ufw'), { recursive: true });
  await mkdir(join(lab.root, 'etc/default'), { recursive: true });
  await cp('/etc/default/ufw', join(lab.root, 'etc/default/ufw'));
  await writeFile(join(etc, 'ufw.conf'), 'ENABLED=no\nLOGLEVEL=off\n');
  await writeFile(join(etc, 'sysctl.conf'), '');
  await writeFile(join(etc, MARKER), 'yes\n');
  const script = join(lab.root, 'confine.sh');
  await writeFile(
    script,
    [
      '#!/bin/sh',
      `mount --bind ${etc} /etc/ufw || exit 99`,
      `mount --bind ${lab.root}/lib/ufw /lib/ufw || exit 99`,
      `mount --bind ${lab.root}/etc/default/ufw /etc/default/ufw || exit 99`,
      'mount -t tmpfs tmpfs /run || exit 99',
      `test -f /etc/ufw/${MARKER} || exit 99`,
      'exec "$@"',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  const runner = localRunner(['nsenter', `--net=${lab.server.path}`, '--', 'unshare', '--mount', '--propagation', 'private', '--', script]);
  const check = await runner('cat', [`/etc/ufw/${MARKER}`]);
  if (check.code !== 0 || check.stdout.trim() !== 'yes') throw new Error(`ufw confinement failed: ${check.stderr}`);
  const ufw = async (...args: string[]) => {
    const r = await runner('ufw', args);
    if (r.code !== 0) throw new Error(`ufw ${args.join(' ')}: ${r.stderr || r.stdout}`);
    return r.stdout;
  };
  return {
    runner,
    ufw,
    async configHash() {
      const h = createHash('sha256');
      for (const f of ['ufw.conf', 'user.rules', 'user6.rules', 'before.rules', 'after.rules'])
        h.update(await readFile(join(etc, f)).catch(() => Buffer.from('absent')));
      return h.digest('hex');
    },
  };
}
