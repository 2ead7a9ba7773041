/**
 * `include` lines of the found config, resolved under the host's root. nft resolves an include
 * on the filesystem it runs on: `include "/etc/nftables.d/*.nft"` in `<root>/etc/nftables.conf`
 * would read the machine's `/etc/nftables.d`, not the root's. When the root is not `/`, the config
 * and everything it includes are copied into a private directory with every include rewritten to
 * point under the root (absolute paths under the root, `./x` under the root's `/`, other relative
 * paths under the root's `/etc`, nft's default include path); wildcards in the last path segment
 * are expanded here, in the order nft would take (sorted). Wildcards in a directory are refused.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { MeshpError } from '@meshp/core';

export interface ResolvedConfig {
  /** The file to give `nft -f`. */
  file: string;
  cleanup(): Promise<void>;
}

const INCLUDE = /^(\s*)include\s+"([^"]*)"\s*;?\s*$/;
const WILD = /[*?[]/;
const MAX_DEPTH = 16;

function globRegex(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) re += '\\[';
      else {
        const body = pattern
          .slice(i + 1, end)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\');
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Where an include's path points, under the root. */
function underRoot(root: string, path: string): string {
  if (isAbsolute(path)) return join(root, path);
  if (path.startsWith('./')) return join(root, path);
  return join(root, 'etc', path);
}

async function expand(target: string, what: string): Promise<string[]> {
  if (!WILD.test(target)) return [target];
  if (WILD.test(dirname(target))) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `config include ${JSON.stringify(what)}: wildcards in a directory are not resolved under the host root`);
  }
  const re = globRegex(basename(target));
  const names = await readdir(dirname(target)).catch(() => [] as string[]);
  return names
    .filter((n) => !n.startsWith('.') && re.test(n))
    .sort()
    .map((n) => join(dirname(target), n));
}

/** The config to load, its includes pointing under `root`. The root `/` needs nothing. */
export async function resolveIncludes(root: string, file: string): Promise<ResolvedConfig> {
  const text = await readFile(file, 'utf8');
  if (resolve(root) === '/' || !text.split('\n').some((l) => INCLUDE.test(l))) return { file, cleanup: async () => undefined };
  const dir = await mkdtemp(join(tmpdir(), 'meshp-nftconf-'));
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    const rewrite = async (source: string, body: string, depth: number): Promise<string> => {
      if (depth > MAX_DEPTH) throw new MeshpError('MESHP_FIREWALL_FAILED', `config includes nest deeper than ${MAX_DEPTH} (a loop?) at ${source}`);
      const out: string[] = [];
      for (const line of body.split('\n')) {
        const m = INCLUDE.exec(line);
        if (!m) {
          out.push(line);
          continue;
        }
        const [, indent, path] = m as unknown as [string, string, string];
        const target = underRoot(root, path);
        const files = await expand(target, path);
        if (!WILD.test(path) && files.length === 1) {
          // A missing file stays a missing file: nft reports it.
          const included = await readFile(files[0]!, 'utf8').catch(() => null);
          out.push(`${indent}include "${included === null ? files[0]! : await rewrite(files[0]!, included, depth + 1)}"`);
          continue;
        }
        for (const f of files) out.push(`${indent}include "${await rewrite(f, await readFile(f, 'utf8'), depth + 1)}"`);
      }
      const copy = join(dir, `${randomBytes(4).toString('hex')}-${basename(source).replace(/[^\w.-]/g, '_')}`);
      await writeFile(copy, out.join('\n'), { mode: 0o600 });
      return copy;
    };
    return { file: await rewrite(file, text, 0), cleanup };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
