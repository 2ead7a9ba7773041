import { randomBytes } from 'node:crypto';
import { constants, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError, isMeshpError } from '@meshp/core';
import type { RunOptions, RunResult, Runner } from './runner.js';
import { parseRuleset, type Batch, type Ruleset } from './schema.js';

/**
 * `nft` spoken through a runner. Batches go through a file, never stdin: nft 1.0.6 exits 0 and
 * applies nothing on malformed JSON from stdin (FIREWALLS.md pitfall 5). A batch is one netlink
 * transaction: it applies whole or not at all.
 */
export class Nft {
  /** How many times the ruleset was read: the no-op ensure reads it once. */
  reads = 0;

  constructor(
    private readonly runner: Runner,
    private readonly bin = 'nft',
  ) {}

  async run(args: readonly string[], what: string, options?: RunOptions): Promise<RunResult> {
    return runTool(this.runner, [this.bin, ...args], what, options);
  }

  async list(): Promise<Ruleset> {
    this.reads++;
    const { stdout } = await this.run(['-j', 'list', 'ruleset'], 'nft -j list ruleset');
    return parseRuleset(stdout);
  }

  async apply(batch: Batch): Promise<void> {
    if (batch.nftables.length === 0) return;
    await this.applyFile(JSON.stringify(batch), true);
  }

  /** Loads a file of nft's own syntax (or JSON with `json`). */
  async applyFile(text: string, json = false): Promise<void> {
    await this.withFile(text, json ? 'json' : 'nft', (file) => this.run(json ? ['-j', '-f', file] : ['-f', file], 'nft -f'));
  }

  /**
   * Loads a file of nft's own syntax with `-e -a`: resolves with the echo (every committed rule
   * with its new handle), or null when nft could not parse the file — then nothing reached the
   * kernel, and the caller may send the same batch as JSON.
   */
  async applyEcho(text: string): Promise<string | null> {
    return this.withFile(text, 'nft', async (file) => {
      const out = `${file}.echo`;
      try {
        const { stdout } = await this.run(['-e', '-a', '-f', file], 'nft -e -a -f', { stdoutFile: out });
        return stdout || readEcho(out);
      } catch (e) {
        if (isMeshpError(e, 'MESHP_FIREWALL_FAILED') && /syntax error/.test(String(e.details?.stderr ?? ''))) return null;
        throw e;
      } finally {
        rmSync(out, { force: true });
      }
    });
  }

  /** A private file for the batch. Written and removed synchronously: a few hundred kB, mostly in memory (/dev/shm). */
  private async withFile<T>(text: string, ext: string, use: (file: string) => Promise<T>): Promise<T> {
    const file = join(await scratchDir(), `meshp-nft-${process.pid}-${randomBytes(4).toString('hex')}.${ext}`);
    writeFileSync(file, text, { mode: 0o600, flag: 'wx' });
    try {
      return await use(file);
    } finally {
      rmSync(file, { force: true });
    }
  }
}

function readEcho(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

let scratch: Promise<string> | undefined;

/** Where batch files go: memory (/dev/shm) when it is writable, else the temporary directory. */
function scratchDir(): Promise<string> {
  scratch ??= access('/dev/shm', constants.W_OK).then(
    () => '/dev/shm',
    () => tmpdir(),
  );
  return scratch;
}

/** Runs a tool, turning a missing binary and a failure into coded errors. */
export async function runTool(runner: Runner, argv: readonly string[], what: string, options?: RunOptions): Promise<RunResult> {
  let result: RunResult;
  try {
    result = options ? await runner(argv, options) : await runner(argv);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new MeshpError('MESHP_FIREWALL_TOOL_MISSING', `${argv[0]} is not installed`, { cause: e });
    throw new MeshpError('MESHP_FIREWALL_FAILED', `${what} could not be run: ${(e as Error).message}`, { cause: e });
  }
  // 127: the wrapper (nsenter, sh) could not find the command.
  if (result.code === 127) {
    throw new MeshpError('MESHP_FIREWALL_TOOL_MISSING', `${argv[0]} is not installed: ${result.stderr.trim()}`);
  }
  if (result.code !== 0) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `${what} failed (exit ${result.code}): ${firstLines(result.stderr)}`, {
      details: { exit: result.code, stderr: result.stderr },
    });
  }
  return result;
}

function firstLines(s: string): string {
  return s.trim().split('\n').slice(0, 3).join(' / ') || 'no message';
}
