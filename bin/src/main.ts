#!/usr/bin/env node
import { oneLine } from '@meshp/core';
import { createCli } from './cli.js';
import { Refusal } from './output.js';
import { guardStream } from './sanitize.js';

// Text a node reported never reaches the terminal as a control sequence (sanitize.ts).
guardStream(process.stdout);
guardStream(process.stderr);

try {
  await createCli(process.argv.slice(2)).parseAsync();
} catch (e) {
  if (e instanceof Refusal) {
    process.stderr.write(`${e.line}\n`);
    process.exitCode = e.exitCode;
  } else if (e instanceof Error && (e as { usage?: boolean }).usage) {
    process.stderr.write(`MESHP_USAGE: ${e.message} (meshp --help)\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`${oneLine(e)}\n`);
    process.exitCode = 1;
  }
}
