import { pino, type Logger } from 'pino';

/** JSON lines on stdout, written synchronously so a crash loses none. */
export function createLogger(name: string, level = process.env.MESHP_LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ dest: 1, sync: true }));
}

export type { Logger };
