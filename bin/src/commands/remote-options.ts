import type { Argv } from 'yargs';
import type { GlobalArgs } from '../global-args.js';

export interface RemoteCommandArgs extends GlobalArgs {
  network?: string;
  credential?: string;
}

/** The options every command that talks to a controller takes (with --controller and --state). */
export function remoteOptions<T extends GlobalArgs>(y: Argv<T>): Argv<T & { network: string; credential: string | undefined }> {
  return y
    .option('network', { type: 'string', default: 'default', describe: 'the network' })
    .option('credential', { type: 'string', describe: 'the admin credential file (else DIR/admin.credential from --state DIR)' }) as Argv<
    T & { network: string; credential: string | undefined }
  >;
}

export interface ChangeArgs {
  yes: boolean;
  preview: boolean;
}

/** The confirm contract of every command that changes a node or the network: --preview says and changes nothing; --yes is needed off a terminal. */
export function changeOptions<T>(y: Argv<T>): Argv<T & ChangeArgs> {
  return y
    .option('yes', { type: 'boolean', default: false, describe: 'change without asking (required off a terminal)' })
    .option('preview', { type: 'boolean', default: false, describe: 'say what would change; change nothing' }) as Argv<T & ChangeArgs>;
}
