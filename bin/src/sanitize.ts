/**
 * The CLI's output through sanitize (core/src/util/sanitize.ts): nothing a node reports reaches the
 * operator's terminal as a control sequence.
 */
import { sanitize } from '@meshp/core/util';

export { sanitize };

type Write = typeof process.stdout.write;

/**
 * Routes every write to `stream` through sanitize: the one place the CLI's output (tables, JSON,
 * refusals) reaches a terminal. Buffers are decoded as UTF-8 first, as a terminal would.
 */
export function guardStream(stream: NodeJS.WriteStream): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  const guarded = (chunk: unknown, ...rest: unknown[]): boolean => {
    if (typeof chunk === 'string') return write(sanitize(chunk), ...rest);
    if (chunk instanceof Uint8Array) {
      const encoding = typeof rest[0] === 'string' ? rest.shift() : undefined;
      void encoding;
      return write(sanitize(Buffer.from(chunk).toString('utf8')), ...rest);
    }
    return write(chunk, ...rest);
  };
  stream.write = guarded as Write;
}
