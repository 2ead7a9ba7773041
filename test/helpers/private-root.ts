/**
 * A script run with the file store's root `/` where `/` is not this machine's: a private mount
 * namespace (unshare --mount), a tmpfs over a scratch folder, and a chroot into it. Inside, only
 * /usr (the node binary and its libraries) and the worktree are visible, both bound read-only,
 * plus /proc (the file store opens paths through /proc/self/fd). Nothing the script does can
 * reach the machine's files; the tmpfs and its mounts vanish with the namespace.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Teardownable } from './netns.js';

export const WORKTREE = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const SETUP = `
set -e
S="$1"; W="$2"; shift 2
mount -t tmpfs -o size=64m,mode=0755 meshp-private-root "$S"
mkdir -p "$S/usr" "$S/proc" "$S/dev" "$S/tmp" "$S$W"
mount --bind /usr "$S/usr" && mount -o remount,bind,ro "$S/usr"
mount --bind "$W" "$S$W" && mount -o remount,bind,ro "$S$W"
mount -t proc proc "$S/proc"
for d in null urandom; do touch "$S/dev/$d"; mount --bind "/dev/$d" "$S/dev/$d"; done
for l in bin lib lib64 sbin; do [ -e "/usr/$l" ] && ln -s "usr/$l" "$S/$l"; done
# env -i: tap wraps spawn to add its NODE_OPTIONS loaders, which would write into the read-only worktree.
exec chroot "$S" /usr/bin/env -i PATH=/usr/bin:/usr/sbin HOME=/tmp "$@"
`;

/** Why the private root cannot be made here, or null when it can. */
export function privateRootUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for unshare --mount and chroot';
  const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']);
  return probe.status === 0 ? null : `unshare --mount failed: ${probe.stderr?.toString().trim()}`;
}

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

/** Runs `node <script> ...args` (a path inside the worktree) chrooted into a fresh private root. */
export function inPrivateRoot(t: Teardownable, script: string, args: string[] = [], timeoutMs = 60_000): Promise<Ran> {
  const scratch = mkdtempSync(join(tmpdir(), 'meshp-root-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const argv = ['--mount', '--propagation', 'private', 'sh', '-c', SETUP, 'setup', scratch, WORKTREE, process.execPath, script, ...args];
  return new Promise((done) => {
    const child = spawn('unshare', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'), timeoutMs);
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, out, err });
    });
  });
}
