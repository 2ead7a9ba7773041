/**
 * The controller, the agent and the CLI as real processes INSIDE one lab namespace (the server
 * machine of nft-lab.ts): the controller listens on that namespace's loopback, so every byte of the
 * control traffic stays inside it. Processes are killed by their pid in teardown.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Netns, Teardownable } from './netns.js';
import { Proc, type LogLine } from './grpc-procs.js';

/** A CLI process inside the lab namespace. */
export class NsProc extends Proc {
  constructor(t: Teardownable, ns: Netns, args: string[]) {
    super(t, args, ns);
  }

  override waitFor(pred: (l: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> {
    return super.waitFor(pred, timeoutMs);
  }
}

export { meshpIn, type Run } from './cli.js';

export interface NsCluster {
  controller: NsProc;
  /** Its state folder. */
  state: string;
  address: string;
  /** Admin CLI arguments reaching the controller. */
  admin: string[];
  /** `intervalS`: the agent's timer reconcile; a delta is reconciled at once whatever it is. */
  agent(name: string, token: string, root: string, extra?: string[], intervalS?: number): NsProc;
}

/** A controller on the namespace's loopback (`controllerArgs` added to its serve); agents started in the same namespace. */
export async function nsCluster(t: Teardownable, ns: Netns, dir: string, controllerArgs: string[] = []): Promise<NsCluster> {
  const state = join(dir, 'ctl');
  const controller = new NsProc(t, ns, ['controller', 'serve', '--state', state, '--listen', '127.0.0.1:0', ...controllerArgs]);
  const line = await controller.waitFor((l) => l.msg === 'controller serving');
  const address = String(line.address);
  const admin = ['--state', state, '--controller', address];
  return {
    controller,
    state,
    address,
    admin,
    agent: (name, token, root, extra = [], intervalS = 1) => {
      const base = join(dir, name);
      mkdirSync(base, { recursive: true });
      return new NsProc(t, ns, [
        'agent',
        '--state',
        join(base, 'state'),
        '--controller',
        address,
        '--name',
        name,
        '--root',
        root,
        '--docker-socket',
        join(base, 'absent-docker.sock'),
        '--interval',
        String(intervalS),
        '--token',
        token,
        ...extra,
      ]);
    },
  };
}
