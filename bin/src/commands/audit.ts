import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { remoteOptions } from './remote-options.js';

export const auditCommand: CommandModule<GlobalArgs, GlobalArgs & { network: string; credential?: string; since?: string; node?: string; limit: number }> = {
  command: 'audit',
  describe: 'the audit log: every admin change to the network, oldest first, with its time, actor, what changed and the state version it made',
  builder: (y) =>
    remoteOptions(y)
      .option('since', { type: 'string', describe: 'only changes since a time (ISO, 2026-12-02T07:00:00Z) or a duration ago (90s, 30m, 12h, 7d)' })
      .option('node', { type: 'string', describe: 'only changes about this node' })
      .option('limit', { type: 'number', default: 100, describe: 'the newest this many (at most 1000)' }),
  handler: async (a) => {
    const { auditList } = await import('../remote/audit.js');
    await auditList(a);
  },
};
