/**
 * The machine's resolver manager under the host's root, read through this plugin's own I/O into
 * core's catalogue of kinds (core/src/lifecycle/resolver-managers.ts). Nothing here writes.
 */
import { readFile, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { resolverManagerSeen, type ResolverManagerSeen } from '@meshp/core/lifecycle';

export async function detectManager(root: string): Promise<ResolverManagerSeen> {
  return resolverManagerSeen(
    (path) => readFile(join(root, path), 'utf8').catch(() => null),
    (path) => readlink(join(root, path)).catch(() => null),
    (dir) => readdir(join(root, dir)).catch(() => []),
  );
}
