// Run by test/integration/files-private-root.test.ts inside a private root (helpers/private-root.ts):
// the real host with the real file and state plugins, root '/', as an agent runs by default.
// Prints what happened as one JSON document.
import { lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { Host } from '@meshp/core/host';
import { Reconciler } from '@meshp/core/reconcile';
import { LocalFilesPlugin } from '@meshp/files-local';
import { SqliteStatePlugin } from '@meshp/state-sqlite';

const STATE = '/var/lib/meshp';
const decl = (mode, modules) => ({ apiVersion: 'meshp/v1', node: 'n1', mode, settings: { ports: {} }, modules });
async function apply(d) {
  const host = new Host({ root: '/', stateDir: STATE }).use(new SqliteStatePlugin(), new LocalFilesPlugin());
  try {
    const { report } = await new Reconciler(host).reconcile(d);
    return Object.fromEntries(report.resources.map((r) => [r.key, { state: r.state, reason: r.reason ?? '' }]));
  } finally {
    await host.close();
  }
}
const text = (p) => readFileSync(p, 'utf8');
const out = {};

// Case 1: a held file and an alias to its folder (as nginx sites-enabled → sites-available).
mkdirSync('/etc/web', { recursive: true });
writeFileSync('/etc/web/web.conf', 'found\n');
symlinkSync('web', '/etc/alias');
const alias = decl('adopted', [
  { name: 'web', taken: false, files: [{ path: '/etc/web/web.conf', content: 'mesh\n' }] },
  { name: 'other', taken: true, files: [{ path: '/etc/alias/web.conf', content: 'through the alias\n' }] },
]);
out.alias = [await apply(alias), await apply(alias)];
out.aliasContent = text('/etc/web/web.conf');

// Case 2: an owned file swapped for an absolute symlink to any file of the machine.
rmSync(STATE, { recursive: true, force: true });
const app = (files) => decl('converged', [{ name: 'app', taken: true, files }]);
const conf = [{ path: '/srv/app/app.conf', content: 'app\n' }];
out.created = await apply(app(conf));
mkdirSync('/etc/ssh', { recursive: true });
writeFileSync('/etc/ssh/sshd_config', 'PermitRootLogin no\n');
rmSync('/srv/app/app.conf');
symlinkSync('/etc/ssh/sshd_config', '/srv/app/app.conf');
out.swapped = await apply(app(conf));
out.afterWrite = text('/etc/ssh/sshd_config');
out.removed = await apply(app([]));
out.afterRemove = text('/etc/ssh/sshd_config');
out.linkLeft = lstatSync('/srv/app/app.conf').isSymbolicLink();
// A marker: the parent checks it is not on the machine's own /.
writeFileSync('/meshp-private-root-marker', 'x');
process.stdout.write(JSON.stringify(out));
