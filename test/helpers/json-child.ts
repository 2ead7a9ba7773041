/** A child process speaking JSON lines (the DNS tests' resolver and node children): requests by id on stdin, answers waited for on stdout. */
import type { ChildProcess } from 'node:child_process';

export class JsonChild<L extends { msg: string; id?: number }> {
  lines: L[] = [];
  stderr = '';
  #seq = 0;
  constructor(readonly proc: ChildProcess) {
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        this.lines.push(JSON.parse(buf.slice(0, i)) as L);
        buf = buf.slice(i + 1);
      }
    });
    proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  /** The first line that `pred` takes (up to 30 s); refused when the child exits first. */
  async wait(pred: (l: L) => boolean): Promise<L> {
    for (let i = 0; i < 600; i++) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (this.proc.exitCode !== null) throw new Error(`the resolver exited: ${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no answer; stderr: ${this.stderr}`);
  }

  /** One request, answered by the line that carries its id. */
  async request(op: Record<string, unknown>): Promise<L> {
    const id = ++this.#seq;
    this.proc.stdin!.write(JSON.stringify({ ...op, id }) + '\n');
    return this.wait((l) => l.id === id);
  }
}
