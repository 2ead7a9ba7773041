/**
 * Debian's resolvconf (and openresolv, its other kind), real but never installed: the package fetched from apt (`apt-get download`,
 * no dpkg -i, so the machine's own /etc/resolv.conf is never taken over), unpacked into a node's
 * root the test owns, and run chrooted there inside a mount namespace of its own (`unshare -m`):
 * /usr bound read-only and /dev bound, so /etc, /run and /lib/resolvconf are the root's and nothing
 * of the machine is seen or written. The namespace ends with each command.
 */
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A Debian package's .deb, fetched once into a cache folder (MESHP_DEB_CACHE, else $TMPDIR/meshp-debs), never installed; null when apt cannot fetch it. */
export async function debianDeb(name: string): Promise<string | null> {
  const dir = process.env['MESHP_DEB_CACHE'] ?? join(tmpdir(), 'meshp-debs');
  mkdirSync(dir, { recursive: true });
  const have = () => readdirSync(dir).find((f) => f.startsWith(`${name}_`) && f.endsWith('.deb'));
  const download = () =>
    run('apt-get', ['download', '-q', name], { cwd: dir }).then(
      () => true,
      () => false,
    );
  // A machine whose package lists were never fetched (every package already there): the lists once, then again.
  if (!have() && !(await download())) await run('apt-get', ['update', '-qq']).then(download, () => undefined);
  const deb = have();
  return deb ? join(dir, deb) : null;
}

export const resolvconfDeb = (): Promise<string | null> => debianDeb('resolvconf');
export const openresolvDeb = (): Promise<string | null> => debianDeb('openresolv');

export interface ResolvconfRoot {
  root: string;
  /** The command the plugin is given in place of `resolvconf`. */
  command: string[];
  /** Runs a program chrooted in the root (resolvconf, getent), in the caller's network namespace. */
  exec(prefix: string[], argv: string[], input?: string): Promise<{ stdout: string; stderr: string }>;
}

/** The package unpacked beside the root (`.pkg`), and the root made able to run its programs chrooted. */
async function unpack(deb: string, root: string): Promise<string> {
  const pkg = join(root, '.pkg');
  mkdirSync(pkg, { recursive: true });
  await run('dpkg-deb', ['-x', deb, pkg]);
  for (const d of ['etc', 'usr', 'dev', 'lib', 'sbin']) mkdirSync(join(root, d), { recursive: true });
  // merged /usr: the programs and libraries through /usr, bound read-only in the namespace.
  symlinkSync('usr/bin', join(root, 'bin'));
  if (existsSync('/lib64')) symlinkSync('usr/lib64', join(root, 'lib64'));
  for (const l of readdirSync('/usr/lib').filter((n) => /-linux-gnu$/.test(n))) symlinkSync(`/usr/lib/${l}`, join(root, 'lib', l));
  return pkg;
}

/** The root's programs run chrooted in a mount namespace of their own: the wrapper, and `exec` through it. */
function chrooted(root: string): Pick<ResolvconfRoot, 'exec'> & { wrapper: string } {
  const wrapper = join(root, '.resolvconf');
  writeFileSync(
    wrapper,
    [
      '#!/bin/sh',
      '# resolvconf of this root, chrooted in a mount namespace of its own (test/helpers/resolvconf-root.ts)',
      'R="$(dirname "$0")"',
      // Each mount in the namespace unshare made: gone with it.
      'exec unshare -m --propagation private sh -ec \'R="$1"; shift; mount --bind /usr "$R/usr"; mount -o remount,bind,ro "$R/usr"; mount --rbind /dev "$R/dev"; exec chroot "$R" "$@"\' sh "$R" "$@"',
      '',
    ].join('\n'),
  );
  chmodSync(wrapper, 0o755);
  const exec = async (prefix: string[], argv: string[], input?: string) =>
    new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
      const full = [...prefix, wrapper, ...argv];
      const child = execFile(full[0]!, full.slice(1), (err, stdout, stderr) =>
        err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr }),
      );
      child.stdin?.end(input ?? '');
    });
  return { wrapper, exec };
}

/**
 * A node's root as a machine that uses resolvconf has it: the package's files, `/etc/resolv.conf` a
 * link to `../run/resolvconf/resolv.conf`, updates enabled, and the entries given already there
 * (the machine's own links), the resolv.conf generated from them by resolvconf itself.
 */
export async function resolvconfRoot(deb: string, root: string, entries: Record<string, string>, netnsPrefix: string[]): Promise<ResolvconfRoot> {
  const pkg = await unpack(deb, root);
  mkdirSync(join(root, 'run/resolvconf/interface'), { recursive: true });
  cpSync(join(pkg, 'etc/resolvconf'), join(root, 'etc/resolvconf'), { recursive: true });
  cpSync(join(pkg, 'lib/resolvconf'), join(root, 'lib/resolvconf'), { recursive: true });
  cpSync(join(pkg, 'sbin/resolvconf'), join(root, 'sbin/resolvconf'));
  symlinkSync('../run/resolvconf/resolv.conf', join(root, 'etc/resolv.conf'));
  writeFileSync(join(root, 'run/resolvconf/enable-updates'), '');
  const { wrapper, exec } = chrooted(root);
  for (const [name, text] of Object.entries(entries)) await exec(netnsPrefix, ['/sbin/resolvconf', '-a', name], text);
  return { root, command: [wrapper, '/sbin/resolvconf'], exec };
}

/**
 * A node's root as a machine that uses openresolv has it: the package's files (its
 * `/etc/resolvconf.conf` as Debian ships it: `resolv_conf=/etc/resolv.conf`), its state under
 * `/run/resolvconf`, and the entries given already there, `/etc/resolv.conf` the plain file openresolv
 * itself wrote from them ("# Generated by resolvconf").
 */
export async function openresolvRoot(deb: string, root: string, entries: Record<string, string>, netnsPrefix: string[]): Promise<ResolvconfRoot> {
  const pkg = await unpack(deb, root);
  for (const d of ['run', 'var']) mkdirSync(join(root, d), { recursive: true });
  symlinkSync('../run', join(root, 'var/run'));
  cpSync(join(pkg, 'etc/resolvconf.conf'), join(root, 'etc/resolvconf.conf'));
  cpSync(join(pkg, 'lib/resolvconf'), join(root, 'lib/resolvconf'), { recursive: true });
  cpSync(join(pkg, 'sbin/resolvconf'), join(root, 'sbin/resolvconf'));
  const { wrapper, exec } = chrooted(root);
  for (const [name, text] of Object.entries(entries)) await exec(netnsPrefix, ['/sbin/resolvconf', '-a', name], text);
  return { root, command: [wrapper, '/sbin/resolvconf'], exec };
}
