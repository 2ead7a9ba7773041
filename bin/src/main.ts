#!/usr/bin/env node
/**
 * Exit status: 0 success, 1 refusal, 2 usage error (a MESHP_USAGE refusal included), 3 the node left
 * its network (MESHP_REMOVED: `meshp agent` only). With --json the
 * error is one JSON document on stderr, {"code","message"}, as well as the exit status.
 */
import { isMeshpError } from '@meshp/core';
import { oneLine } from '@meshp/core/util';
import { createCli } from './cli.js';
import { Refusal } from './output.js';
import { guardStream } from './sanitize.js';

// Text a node reported never reaches the terminal as a control sequence (sanitize.ts).
guardStream(process.stdout);
guardStream(process.stderr);

const argv = process.argv.slice(2);
const json = argv.includes('--json');

function fail(line: string, exitCode: number): void {
  const m = /^(MESHP_[A-Z_]+)(?: \[[^\]]*\])?: ?([\s\S]*)$/.exec(line);
  const code = m?.[1] ?? 'MESHP_PLUGIN_FAILED';
  process.stderr.write(json ? `${JSON.stringify({ code, message: m ? m[2] : line })}\n` : `${line}\n`);
  process.exitCode = code === 'MESHP_USAGE' ? 2 : exitCode;
}

try {
  await createCli(argv).parseAsync();
} catch (e) {
  if (e instanceof Refusal) fail(e.line, e.exitCode);
  else if (e instanceof Error && (e as { usage?: boolean }).usage) fail(`MESHP_USAGE: ${e.message} (meshp --help)`, 2);
  else fail(isMeshpError(e) ? e.oneLine() : oneLine(e), 1);
}
