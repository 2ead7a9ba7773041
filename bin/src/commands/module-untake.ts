import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type Args = GlobalArgs & ChangeArgs & { network: string; credential?: string; node: string; module: string; 'preview-id'?: string; timeout: number };

/** `meshp module untake NODE MODULE` (issue 29): the agent's untake preview, then the untake to exactly it. */
export const untakeCommand: CommandModule<GlobalArgs, Args> = {
  command: 'untake <node> <module>',
  describe:
    "undo a module's take on an adopted node: previewed by its agent; found files restored, the predecessor's container recreated, the module held again",
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .positional('module', { type: 'string', demandOption: true })
      .option('preview-id', { type: 'string', describe: 'untake only if the node is still as this preview saw it' })
      .option('timeout', { type: 'number', default: 60, describe: "seconds to wait for the agent's outcome" }) as never,
  handler: async (a) => {
    const { moduleUntake } = await import('../remote/untake.js');
    await moduleUntake({ ...a, previewId: a['preview-id'] });
  },
};

/** `meshp module release NODE MODULE [--restore]` (issue 29): unassigned, held files as they are; --restore puts back those changed while held. */
export const releaseCommand: CommandModule<GlobalArgs, Args & { restore: boolean }> = {
  command: 'release <node> <module>',
  describe:
    'release an assigned, untaken module: unassigned, its held files left as they are (with --restore: those changed while held get their originals back)',
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .positional('module', { type: 'string', demandOption: true })
      .option('restore', { type: 'boolean', default: false, describe: 'put back the recorded original of each held file that changed while held' })
      .option('preview-id', { type: 'string', describe: 'restore only if the node is still as this preview saw it' })
      .option('timeout', { type: 'number', default: 60, describe: "seconds to wait for the agent's outcome" }) as never,
  handler: async (a) => {
    const { moduleRelease } = await import('../remote/untake.js');
    await moduleRelease({ ...a, previewId: a['preview-id'] });
  },
};
