import { randomBytes } from 'node:crypto';
import { constants, rmSync, writeFileSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError, isMeshpError } from '@meshp/core';
import { MESH_TABLE, RECEIPT_SET } from './classify.js';
import type { NftEngine } from './libnft.js';
import type { RunOptions, RunResult, Runner } from './runner.js';
import { parseRuleset, type Batch, type Ruleset } from './schema.js';

/**
 * `nft` spoken through a runner. Batches go through a file, never stdin: nft 1.0.6 exits 0 and
 * applies nothing on malformed JSON from stdin (docs/firewalls.md pitfall 5). A batch is one netlink
 * transaction: it applies whole or not at all.
 */
export class Nft {
  /** How many times the ruleset was read: the no-op ensure reads it once. */
  reads = 0;

  constructor(
    private readonly runner: Runner,
    private readonly bin = 'nft',
  ) {}

  /** How nft was spoken so far: the library in-process, or a process per command; undefined before the first command. */
  engine(): NftEngine | undefined {
    const r = this.runner as Runner & { engine?: () => NftEngine | undefined };
    return r.engine ? r.engine() : 'process';
  }

  async run(args: readonly string[], what: string, options?: RunOptions): Promise<RunResult> {
    return runTool(this.runner, [this.bin, ...args], what, options);
  }

  async list(): Promise<Ruleset> {
    return parseRuleset(await this.listText());
  }

  /** The ruleset as nft writes it (JSON), unparsed. */
  async listText(): Promise<string> {
    this.reads++;
    return (await this.run(['-j', 'list', 'ruleset'], 'nft -j list ruleset')).stdout;
  }

  async apply(batch: Batch): Promise<void> {
    if (batch.nftables.length === 0) return;
    await this.applyFile(JSON.stringify(batch), true);
  }

  /** Loads a file of nft's own syntax (or JSON with `json`); with `echo`, what nft echoes of it (`nft -e`). */
  async applyFile(text: string, json = false, echo = false): Promise<string> {
    const args = [...(echo ? ['-e'] : []), ...(json ? ['-j'] : [])];
    return (await this.withFile(text, json ? 'json' : 'nft', (file) => this.run([...args, '-f', file], 'nft -f'))).stdout;
  }

  /**
   * Loads a file of nft's own syntax: true (or, with `echo`, what nft echoed: `nft -e`) once nft
   * has applied it, false when nft could not parse it — then nothing reached the kernel, and the
   * caller may send the same batch as JSON.
   */
  async applyNative(text: string, echo?: false): Promise<boolean>;
  async applyNative(text: string, echo: boolean): Promise<string | boolean>;
  async applyNative(text: string, echo = false): Promise<boolean | string> {
    try {
      const out = await this.applyFile(text, false, echo);
      return echo ? out : true;
    } catch (e) {
      if (isMeshpError(e, 'MESHP_FIREWALL_FAILED') && /syntax error/.test(String(e.details?.stderr ?? ''))) return false;
      throw e;
    }
  }

  /** The elements of the mesh table's receipt set; none when the set is not there. */
  async receipt(): Promise<number[]> {
    const what = `nft -j list set inet ${MESH_TABLE} ${RECEIPT_SET}`;
    let stdout: string;
    try {
      ({ stdout } = await this.run(['-j', 'list', 'set', 'inet', MESH_TABLE, RECEIPT_SET], what));
    } catch (e) {
      if (isMeshpError(e, 'MESHP_FIREWALL_FAILED') && /No such file or directory/.test(String(e.details?.stderr ?? ''))) return [];
      throw e;
    }
    return receiptOf(stdout, what);
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

/**
 * The receipt elements nft echoed (`nft -e`) for a batch: the kernel echoes a batch's objects to
 * its sender only once the transaction has committed, so an echoed element is a committed one.
 * nft writes a mark in hex (`0x0000002a`).
 */
export function echoedReceipt(text: string): number[] {
  const out: number[] = [];
  const re = new RegExp(`^add element inet ${MESH_TABLE} ${RECEIPT_SET} \\{ ([^}]*) \\}\\s*$`, 'gm');
  for (const m of text.matchAll(re)) {
    for (const x of m[1]!.split(',')) {
      const n = Number(x.trim());
      if (Number.isInteger(n)) out.push(n);
    }
  }
  return out;
}

/** The receipt set's elements from `nft -j list set` output; anything else is MESHP_FIREWALL_OUTPUT. */
export function receiptOf(text: string, what = 'nft -j list set'): number[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new MeshpError('MESHP_FIREWALL_OUTPUT', `${what}: output is not JSON`, { cause: e });
  }
  const items = (doc as { nftables?: unknown }).nftables;
  if (!Array.isArray(items)) throw new MeshpError('MESHP_FIREWALL_OUTPUT', `${what}: no "nftables" array`);
  for (const item of items) {
    const set = (item as { set?: { name?: unknown; table?: unknown; elem?: unknown } }).set;
    if (!set || set.name !== RECEIPT_SET || set.table !== MESH_TABLE) continue;
    if (set.elem === undefined) return [];
    if (!Array.isArray(set.elem) || !set.elem.every((x) => Number.isInteger(x))) {
      throw new MeshpError('MESHP_FIREWALL_OUTPUT', `${what}: the receipt's elements are not marks`);
    }
    return set.elem as number[];
  }
  throw new MeshpError('MESHP_FIREWALL_OUTPUT', `${what}: no set ${RECEIPT_SET} in the output`);
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
