/**
 * Log lines (pino, agent and controller) carry no raw control characters: text from files, names
 * and peers is escaped before the line is written (core/src/sanitize.ts), and the escapes decode
 * to the exact text, so a log reader loses nothing. A real controller is asked about a node named
 * with CSI, OSC and a bidi override; its log line says so, inert.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { logOptions } from '@meshp/core/util';
import { meshp, startController, workdir } from '../helpers/grpc-procs.js';

const HOSTILE = 'n\u009b2J\u001b]0;owned\u0007\u202eevil\u2066\u061c\u007f';
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

t.test('the options every meshp logger is built with escape C0, DEL, C1 and bidi marks', async (t) => {
  let out = '';
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      out += chunk.toString('utf8');
      cb();
    },
  });
  const log = pino(logOptions('meshp-agent', 'info'), sink);
  log.warn({ path: `/etc/${HOSTILE}`, err: `MESHP_PATH_SYMLINK: ${HOSTILE}` }, `refused ${HOSTILE}`);
  t.notMatch(out.slice(0, -1), RAW, 'no raw control character in the line');
  t.ok(out.endsWith('}\n'), 'one JSON line');
  const line = JSON.parse(out) as Record<string, string>;
  t.equal(line.path, `/etc/${HOSTILE}`, 'the escapes decode to the exact text');
  t.equal(line.msg, `refused ${HOSTILE}`);
});

t.test('a real controller logs a hostile name inert', async (t) => {
  const ctl = await startController(t, workdir(t, 'logsan'));
  let raw = '';
  ctl.proc.child.stdout!.on('data', (d: Buffer) => (raw += d.toString('utf8')));
  const r = meshp('node', 'show', HOSTILE, '--state', ctl.state, '--controller', ctl.address);
  t.not(r.code, 0, 'no such node');
  const line = await ctl.proc.waitFor((l) => l.msg === 'admin call refused' && String(l.err).includes('evil'), 30_000);
  t.match(String(line.err), HOSTILE, 'the log keeps the exact name once decoded');
  t.match(raw, /\\u009b2J\\u001b\]0;owned\\u0007\\u202eevil\\u2066\\u061c\\u007f/, 'written as escapes');
  t.notMatch(raw.replace(/\n/g, ''), RAW, 'no raw control character in what the controller wrote');
});
