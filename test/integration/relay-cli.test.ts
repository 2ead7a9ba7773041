/**
 * `meshp relay list | set | remove` (issue 27, ADR 0040) against a real controller on 127.0.0.1: a
 * relay is previewed (changing nothing), refused off a terminal without --yes, refused with a coded
 * error when not valid or when the controller holds no secret of that name, set with its secret read
 * from a file, listed (secret held, never shown), recorded in the audit log without the secret, and
 * removed.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { meshpAsync, startController, workdir } from '../helpers/grpc-procs.js';

const dir = workdir(t, 'relay-cli');
const ctl = await startController(t, join(dir, 'ctl'));
const cli = (...args: string[]) => meshpAsync(...args, '--state', ctl.state, '--controller', ctl.address);
const SECRET = 'relay-cli-secret-5f1c0e';
const secretFile = join(dir, 'coturn.secret');
writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
const set = ['relay', 'set', 'eu1', '--server', '203.0.113.5:3478', '--secret', 'coturn'];

t.test('relay set: previewed, refused unconfirmed, refused without a secret held, then set and listed', async (t) => {
  const preview = await cli(...set, '--secret-file', secretFile, '--preview', '--json');
  t.equal(preview.code, 0, preview.err);
  t.same(JSON.parse(preview.out).changedNodes, [], 'no tunnel member yet: it changes no node');
  t.equal(JSON.parse((await cli('relay', 'list', '--json')).out).relays.length, 0, 'the preview stored nothing');
  const unconfirmed = await cli(...set, '--secret-file', secretFile);
  t.equal(unconfirmed.code, 1);
  t.match(unconfirmed.err, /^MESHP_CONFIRM_NEEDED/);
  const noSecret = await cli(...set, '--yes');
  t.equal(noSecret.code, 1);
  t.match(noSecret.err, /MESHP_RELAY_INVALID.*holds no secret named coturn/);
  const done = await cli(...set, '--secret-file', secretFile, '--yes');
  t.equal(done.code, 0, done.err);
  t.match(done.out, /relay eu1: 203\.0\.113\.5:3478\/udp, secret coturn .* set \(state version \d+\)/);
  const list = await cli('relay', 'list', '--json');
  t.match(JSON.parse(list.out), {
    relays: [{ id: 'eu1', address: '203.0.113.5', port: 3478, transport: 'udp', secretName: 'coturn', secretHeld: true, allocations: [] }],
    credentialSeconds: 3600,
  });
  t.notMatch(list.out, new RegExp(SECRET), 'the secret is never answered');
  t.match((await cli('relay', 'list')).out, /RELAY\s+SERVER\s+SECRET\s+ALLOCATIONS\neu1\s+203\.0\.113\.5:3478\/udp\s+coturn\s+-/);
  const again = await cli('relay', 'set', 'eu1', '--server', '203.0.113.5:3479', '--transport', 'tcp', '--secret', 'coturn', '--yes');
  t.equal(again.code, 0, `the held secret is kept when no file is given: ${again.err}`);
  const audit = await cli('audit', '--json');
  t.match(audit.out, /relay eu1 set: 203\.0\.113\.5:3478\/udp, secret coturn \(given\)/);
  t.match(audit.out, /relay eu1 set: 203\.0\.113\.5:3479\/tcp, secret coturn \(held\)/);
  t.notMatch(audit.out, new RegExp(SECRET), 'the audit log never has the secret');
});

t.test('invalid relays are refused with a coded error; nothing changes', async (t) => {
  for (const [args, re] of [
    [['relay', 'set', 'eu2', '--server', 'nope', '--secret', 'coturn', '--yes'], /MESHP_RELAY_INVALID.*HOST:PORT/],
    [['relay', 'set', 'eu2', '--server', '203.0.113.5:0', '--secret', 'coturn', '--yes'], /MESHP_RELAY_INVALID.*port 0/],
    [['relay', 'set', 'EU 2', '--server', '203.0.113.5:3478', '--secret', 'coturn', '--yes'], /MESHP_RELAY_INVALID.*id/],
    [
      ['relay', 'set', 'eu2', '--server', '203.0.113.5:3478', '--secret', 'coturn', '--secret-file', join(dir, 'absent'), '--yes'],
      /MESHP_RELAY_INVALID.*cannot be read/,
    ],
  ] as const) {
    const r = await cli(...args);
    t.equal(r.code, 1, args.join(' '));
    t.match(r.err, re);
  }
  t.same(
    JSON.parse((await cli('relay', 'list', '--json')).out).relays.map((r: { id: string }) => r.id),
    ['eu1'],
  );
});

t.test('relay remove: previewed, then removed', async (t) => {
  const preview = await cli('relay', 'remove', 'eu1', '--preview');
  t.match(preview.out, /would remove relay eu1: changes no node\n\(preview: nothing changed\)/);
  const gone = await cli('relay', 'remove', 'eu1', '--yes', '--json');
  t.equal(gone.code, 0, gone.err);
  t.equal(JSON.parse((await cli('relay', 'list', '--json')).out).relays.length, 0);
  const missing = await cli('relay', 'remove', 'eu1', '--yes');
  t.equal(missing.code, 1);
  t.match(missing.err, /MESHP_NOT_FOUND/);
});
