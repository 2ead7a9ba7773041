import { execFile } from 'node:child_process';
import { MeshpError } from '@meshp/core';

/** Runs a tool; a failure is MESHP_TUNNEL_FAILED naming the command and what it said. */
export function run(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const code = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'MESHP_TUNNEL_UNAVAILABLE' : 'MESHP_TUNNEL_FAILED';
      const said = String(stderr || err.message)
        .trim()
        .split('\n')
        .slice(0, 3)
        .join(' / ');
      reject(new MeshpError(code, `${cmd} ${args.slice(0, 4).join(' ')}: ${said}`, { cause: err }));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}
