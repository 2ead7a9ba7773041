import { pino, type Logger } from 'pino';
import { logOptions } from '@meshp/core/util';

/** JSON lines on stdout, written synchronously so a crash loses none, control characters escaped. */
export function createLogger(name: string, level = process.env.MESHP_LOG_LEVEL ?? 'info'): Logger {
  return pino(logOptions(name, level), pino.destination({ dest: 1, sync: true }));
}

export type { Logger };
