/** sanitize.ts: control characters shown inert, and JSON documents decoding to the exact text. */
import t from 'tap';
import { sanitize } from '../../bin/src/sanitize.js';

t.test('C0, DEL, C1 and bidirectional overrides are escaped; newline and tab pass', async (t) => {
  t.equal(sanitize('a\u001b[2Jb\u0007\r\u007f\u009b1m\u202eevil\n\tok'), 'a\\u001b[2Jb\\u0007\\u000d\\u007f\\u009b1m\\u202eevil\n\tok');
  t.equal(sanitize('plain text, é ü 中'), 'plain text, é ü 中');
});

t.test('inside JSON the escapes decode to the very characters', async (t) => {
  const value = { name: '\u001b]0;x\u0007', c1: '\u009b2J', rtl: '\u202e' };
  t.same(JSON.parse(sanitize(JSON.stringify(value, null, 2))), value);
});
