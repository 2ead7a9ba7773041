import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import type { RunResult, Runner } from './runner.js';
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

  async run(args: readonly string[], what: string): Promise<RunResult> {
    return runTool(this.runner, [this.bin, ...args], what);
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
    const file = join(tmpdir(), `meshp-nft-${process.pid}-${randomBytes(4).toString('hex')}.${json ? 'json' : 'nft'}`);
    await writeFile(file, text, { mode: 0o600 });
    try {
      await this.run(json ? ['-j', '-f', file] : ['-f', file], 'nft -f');
    } finally {
      await rm(file, { force: true });
    }
  }
}

/** Runs a tool, turning a missing binary and a failure into coded errors. */
export async function runTool(runner: Runner, argv: readonly string[], what: string): Promise<RunResult> {
  let result: RunResult;
  try {
    result = await runner(argv);
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
