import { statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import type { LibNftClose, LibNftReady, LibNftReply, LibNftRequest } from './libnft-worker.js';
import type { RunOptions, RunResult, Runner } from './runner.js';

/** nft's output flags (libnftables.h): `-j` and `-e`. */
const OUTPUT_JSON = 1 << 4;
const OUTPUT_ECHO = 1 << 5;

/** How nft is spoken: the library in a thread of this process, or a process per command. */
export type NftEngine = 'libnftables' | 'process';

/**
 * libnftables in one worker thread per network namespace (libnft-worker.ts): a command costs the
 * library's own work and a message each way, no process start. The thread holds the process open
 * only while a command is in flight, and ends with its namespace. ADR 0048.
 */
export class LibNft {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (r: RunResult) => void; reject: (e: Error) => void }>();
  #next = 1;
  #dead: Error | undefined;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (m: LibNftReply) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (this.#pending.size === 0) this.#worker.unref();
      p.resolve({ code: m.code, stdout: m.stdout, stderr: m.stderr });
    });
    worker.on('error', (e) => this.#end(e));
    worker.on('exit', (code) => this.#end(new Error(`the libnftables thread exited (${code})`)));
    worker.unref();
  }

  /**
   * The thread for a namespace (none: this process's own), started once; null when libnftables
   * cannot be loaded here, or the namespace is not there. A namespace is known by its file's inode:
   * one deleted and made again under the same name gets a thread of its own, and a thread whose
   * namespace is gone ends (it would hold the namespace alive).
   */
  static for(netns?: string): Promise<LibNft | null> {
    const key = netns ?? '';
    let id = 0;
    if (netns !== undefined) {
      try {
        id = statSync(`/var/run/netns/${netns}`).ino;
      } catch {
        void started.get(key)?.lib.then((lib) => lib?.close());
        started.delete(key);
        return Promise.resolve(null);
      }
    }
    let made = started.get(key);
    if (made && made.id !== id) {
      void made.lib.then((lib) => lib?.close());
      made = undefined;
    }
    if (!made) {
      // A library that cannot be loaded stays so for this namespace: the answer null is kept.
      made = { id, lib: LibNft.#start(netns, id) };
      started.set(key, made);
    }
    const mine = made;
    return mine.lib.then((lib) => {
      if (lib && (lib.#dead || lib.#closing)) {
        if (started.get(key) === mine) started.delete(key);
        return LibNft.for(netns);
      }
      return lib;
    });
  }

  /** One command, as nft would run it: the flags, then `-f FILE` or the command's words. */
  run(req: Omit<LibNftRequest, 'id'>): Promise<RunResult> {
    if (this.#dead) return Promise.reject(this.#dead);
    if (this.#closing) return Promise.reject(new Error('the libnftables thread is closing'));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.ref();
      this.#worker.postMessage({ ...req, id } satisfies LibNftRequest);
    });
  }

  /**
   * Ends the thread once the commands sent before are answered: the thread frees its context
   * first, so the netlink socket (which holds its namespace alive, as the thread does) is closed.
   */
  close(): void {
    if (this.#dead || this.#closing) return;
    this.#closing = true;
    this.#worker.postMessage({ close: true } satisfies LibNftClose);
  }

  #closing = false;

  #end(e: Error): void {
    this.#dead ??= e;
    for (const p of this.#pending.values()) p.reject(this.#dead);
    this.#pending.clear();
  }

  static #start(netns: string | undefined, id: number): Promise<LibNft | null> {
    return new Promise((resolve) => {
      let worker: Worker;
      try {
        // None of the process's own flags (a loader, --input-type): the thread runs this package's JS only.
        worker = new Worker(new URL('./libnft-worker.js', import.meta.url), { workerData: { netns }, execArgv: [] });
      } catch {
        resolve(null);
        return;
      }
      const failed = () => resolve(null);
      worker.once('error', failed);
      worker.once('message', (m: LibNftReady) => {
        worker.off('error', failed);
        if (m.error !== undefined) {
          void worker.terminate();
          resolve(null);
          return;
        }
        const lib = new LibNft(worker);
        if (netns !== undefined) lib.#watch(netns, id);
        resolve(lib);
      });
    });
  }

  /** Ends the thread once its namespace's file is gone or names another namespace: checked twice a second, off the event loop's count. */
  #watch(netns: string, id: number): void {
    const timer = setInterval(() => {
      if (this.#dead) {
        clearInterval(timer);
        return;
      }
      stat(`/var/run/netns/${netns}`).then(
        (st) => {
          if (st.ino !== id) this.close();
        },
        () => this.close(),
      );
    }, 500);
    timer.unref();
  }
}

const started = new Map<string, { id: number; lib: Promise<LibNft | null> }>();

/** nft's arguments as a library request; undefined for any this engine does not speak (then a process runs them). */
export function requestOf(args: readonly string[]): Omit<LibNftRequest, 'id'> | undefined {
  let flags = 0;
  let i = 0;
  for (; i < args.length && args[i]!.startsWith('-'); i++) {
    const a = args[i]!;
    if (a === '-j') flags |= OUTPUT_JSON;
    else if (a === '-e') flags |= OUTPUT_ECHO;
    else if (a === '-f') {
      const file = args[i + 1];
      return file !== undefined && i + 2 === args.length ? { flags, file } : undefined;
    } else return undefined;
  }
  return i < args.length ? { flags, cmd: args.slice(i).join(' ') } : undefined;
}

/**
 * A runner for `nft` that speaks libnftables in-process where it loads, and runs `fallback` where it
 * does not (no library, no FFI for this platform) or for what the library request cannot carry
 * (stdin). `engine()` says which one the first command used.
 */
export function libnftRunner(bin: string, fallback: Runner, netns?: string): Runner & { engine(): NftEngine | undefined } {
  let used: NftEngine | undefined;
  const runner = async (argv: readonly string[], options?: RunOptions): Promise<RunResult> => {
    const req = argv[0] === bin && options?.input === undefined ? requestOf(argv.slice(1)) : undefined;
    const lib = req ? await LibNft.for(netns) : null;
    if (!lib || !req) {
      used ??= 'process';
      return options ? fallback(argv, options) : fallback(argv);
    }
    used ??= 'libnftables';
    return lib.run(req);
  };
  return Object.assign(runner, { engine: () => used });
}
