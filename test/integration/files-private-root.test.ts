/**
 * Cases 1 and 2 of issue 13 with the file store's root `/`, as an agent runs by default, inside a
 * private mount namespace chrooted into a tmpfs (helpers/private-root.ts): the machine's own files
 * are out of reach.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { WORKTREE, inPrivateRoot, privateRootUnavailable } from '../helpers/private-root.js';

const why = privateRootUnavailable();
if (why) {
  t.plan(0, `the private root cannot be made here: ${why}`);
  process.exit(0);
}

{
  t.test('root /: an alias to a held file, and an owned file swapped for a symlink', async (t) => {
    const r = await inPrivateRoot(t, join(WORKTREE, 'test/helpers/private-root-files.mjs'));
    t.equal(r.code, 0, r.err);
    const out = JSON.parse(r.out) as Record<string, unknown> & {
      alias: Record<string, { state: string; reason: string }>[];
      created: Record<string, { state: string }>;
      swapped: Record<string, { state: string; reason: string }>;
      removed: Record<string, { state: string; reason: string }>;
    };
    for (const [i, states] of out.alias.entries()) {
      t.equal(states['file:/etc/web/web.conf']?.state, 'held', `apply ${i + 1}: held, not "changed by something else"`);
      t.equal(states['file:/etc/alias/web.conf']?.state, 'refused');
      t.match(states['file:/etc/alias/web.conf']?.reason, /^MESHP_PATH_SYMLINK: /);
    }
    t.equal(out.aliasContent, 'found\n', 'the held file is byte for byte what was found');
    t.equal(out.created['file:/srv/app/app.conf']?.state, 'created');
    t.equal(out.swapped['file:/srv/app/app.conf']?.state, 'refused');
    t.match(out.swapped['file:/srv/app/app.conf']?.reason, /^MESHP_PATH_SYMLINK: \/srv\/app\/app\.conf: /);
    t.equal(out.afterWrite, 'PermitRootLogin no\n', 'nothing written through the link');
    t.equal(out.removed['file:/srv/app/app.conf']?.state, 'refused');
    t.equal(out.afterRemove, 'PermitRootLogin no\n', "the link's target is not removed");
    t.equal(out.linkLeft, true);
    t.notOk(existsSync('/meshp-private-root-marker'), "the script never reached this machine's /");
    t.notOk(existsSync('/etc/alias'));
  });
}
