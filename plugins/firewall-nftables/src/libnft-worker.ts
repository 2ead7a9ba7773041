/**
 * libnftables (the library `nft` itself is built on) in a thread of its own, entered into the
 * network namespace it speaks to: a thread's `setns(CLONE_NEWNET)` moves that thread only, and the
 * netlink socket libnftables opens belongs to the namespace of the thread that opened it. One
 * context for the thread's life, its output and errors buffered; each request is one command text
 * or one file, run as `nft` would run it (`nft_run_cmd_from_buffer`, `nft_run_cmd_from_filename`).
 * docs/adr/0048-nft-in-process.md.
 */
import { closeSync, openSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import koffi from 'koffi';

export interface LibNftRequest {
  id: number;
  /** nft's output flags: NFT_CTX_OUTPUT_JSON for `-j`, NFT_CTX_OUTPUT_ECHO for `-e`. */
  flags: number;
  /** A command text (`list ruleset`) … */
  cmd?: string;
  /** … or a file to load (`-f`). */
  file?: string;
}

export interface LibNftReply {
  id: number;
  code: number;
  stdout: string;
  stderr: string;
}

/** The last request: free the context (closing its socket), then end the thread. */
export interface LibNftClose {
  close: true;
}

/** The first message: the context is open (and the thread in its namespace), or why not. */
export interface LibNftReady {
  ready: true;
  error?: string;
}

const CLONE_NEWNET = 0x40000000;
const port = parentPort!;
const { netns } = workerData as { netns?: string };

interface Opened {
  run(req: LibNftRequest): LibNftReply;
  free(): void;
}

function open(): Opened {
  const lib = koffi.load('libnftables.so.1');
  const ctxNew = lib.func('void *nft_ctx_new(uint32_t flags)');
  const setFlags = lib.func('void nft_ctx_output_set_flags(void *ctx, uint32_t flags)');
  const bufferOutput = lib.func('int nft_ctx_buffer_output(void *ctx)');
  const bufferError = lib.func('int nft_ctx_buffer_error(void *ctx)');
  const outputBuffer = lib.func('const char *nft_ctx_get_output_buffer(void *ctx)');
  const errorBuffer = lib.func('const char *nft_ctx_get_error_buffer(void *ctx)');
  const fromBuffer = lib.func('int nft_run_cmd_from_buffer(void *ctx, const char *buf)');
  const fromFile = lib.func('int nft_run_cmd_from_filename(void *ctx, const char *filename)');
  const ctxFree = lib.func('void nft_ctx_free(void *ctx)');
  if (netns !== undefined) {
    const setns = koffi.load('libc.so.6').func('int setns(int fd, int nstype)');
    const fd = openSync(`/var/run/netns/${netns}`, 'r');
    try {
      if (setns(fd, CLONE_NEWNET) !== 0) throw new Error(`setns into ${netns} failed`);
    } finally {
      closeSync(fd);
    }
  }
  const ctx: unknown = ctxNew(0);
  if (!ctx) throw new Error('nft_ctx_new returned no context');
  if (bufferOutput(ctx) !== 0 || bufferError(ctx) !== 0) throw new Error('libnftables could not buffer its output');
  return {
    run(req) {
      setFlags(ctx, req.flags);
      const rc = req.file !== undefined ? (fromFile(ctx, req.file) as number) : (fromBuffer(ctx, req.cmd ?? '') as number);
      // Each get hands back what was written since the last and starts the buffer anew.
      const stdout = (outputBuffer(ctx) as string | null) ?? '';
      const stderr = (errorBuffer(ctx) as string | null) ?? '';
      return { id: req.id, code: rc === 0 ? 0 : 1, stdout, stderr };
    },
    free: () => ctxFree(ctx),
  };
}

let opened: Opened | undefined;
try {
  opened = open();
  port.postMessage({ ready: true } satisfies LibNftReady);
} catch (e) {
  port.postMessage({ ready: true, error: (e as Error).message } satisfies LibNftReady);
}
if (opened) {
  const nft = opened;
  port.on('message', (req: LibNftRequest | LibNftClose) => {
    if ('close' in req) {
      nft.free();
      port.close();
      return;
    }
    port.postMessage(nft.run(req));
  });
}
