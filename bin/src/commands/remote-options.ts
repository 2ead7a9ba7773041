import type { Argv } from 'yargs';
import type { GlobalArgs } from '../cli.js';

export interface RemoteCommandArgs extends GlobalArgs {
  network?: string;
  credential?: string;
}

/** The options every command that talks to a controller takes (with --controller and --state). */
export function remoteOptions<T extends GlobalArgs>(y: Argv<T>): Argv<T & { network: string; credential: string | undefined }> {
  return y
    .option('network', { type: 'string', default: 'default', describe: 'the network' })
    .option('credential', { type: 'string', describe: 'the admin credential file (else DIR/admin.credential from --state DIR)' }) as Argv<T & { network: string; credential: string | undefined }>;
}
