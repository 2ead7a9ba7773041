/**
 * Issue 33 item 11: the folders the file module makes on the way to a declared file are 0755 whatever
 * the agent's umask (the shipped unit runs it with UMask=0077, which made /etc/motd.d 0700 and the
 * file in it unreachable to everyone else); a folder that was found keeps its mode. Real files in a
 * temporary root, through the reconciler.
 */
import t from 'tap';
import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { bed, declaration, stateOf } from '../helpers/host.js';

const modeOf = (p: string) => statSync(p).mode & 0o7777;

t.test('under umask 0077 the folders made for a declared file are 0755; found ones keep their mode', async (t) => {
  const before = process.umask(0o077);
  t.teardown(() => void process.umask(before));
  const b = bed(t);
  mkdirSync(join(b.root, 'etc/found'), { recursive: true });
  chmodSync(join(b.root, 'etc/found'), 0o700);
  const r = await b.apply(
    declaration('converged', [
      {
        name: 'motd',
        taken: true,
        files: [
          { path: '/etc/motd.d/deep/meshp', content: 'hello\n', mode: '0644' },
          { path: '/etc/found/x.conf', content: 'x\n', mode: '0644' },
        ],
      },
    ]),
  );
  t.equal(stateOf(r, 'file:/etc/motd.d/deep/meshp'), 'created');
  t.equal(modeOf(join(b.root, 'etc/motd.d')), 0o755, '/etc/motd.d, made by meshp: 0755');
  t.equal(modeOf(join(b.root, 'etc/motd.d/deep')), 0o755, 'and the folder under it');
  t.equal(modeOf(join(b.root, 'etc/motd.d/deep/meshp')), 0o644, 'the file has its declared mode');
  t.equal(modeOf(join(b.root, 'etc/found')), 0o700, 'a found folder keeps its own mode');
});
