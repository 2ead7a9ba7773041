import t from 'tap';
import { Host, MeshpError, type Opening } from '@meshp/core';
import { IptablesPlugin } from '@meshp/firewall-iptables';
import { UfwDriver, UfwPlugin } from '../../examples/firewall-kind/src/index.js';
import { labAvailable } from '../helpers/netns.js';
import { ADDR, reach } from '../helpers/ipt-lab.js';
import { machineUfwHash, ufwBed } from '../helpers/ipt-ufw.js';

const open = (o: Partial<Opening> & Pick<Opening, 'port' | 'path'>): Opening => ({
  id: `web/${o.path}/tcp/${o.port}`,
  module: 'web',
  protocol: 'tcp',
  from: [],
  action: 'accept',
  ...o,
});

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const machine = await machineUfwHash();
  t.teardown(async () => {
    if ((await machineUfwHash()) !== machine) throw new Error("the machine's own ufw state changed");
  });

  t.test('ufw found: the ufw plugin answers; without it, adoption is refused naming ufw', async (t) => {
    const bed = await ufwBed(t);
    await bed.ufw('--force', 'enable');
    await bed.ufw('allow', '8080/tcp');
    const both = new Host({ root: bed.dir }).use(new IptablesPlugin({ runner: bed.runner }), new UfwPlugin({ runner: bed.runner }));
    t.equal((await both.firewall())?.kind, 'ufw');
    const alone = new Host({ root: bed.dir }).use(new IptablesPlugin({ runner: bed.runner }));
    const err = await alone.firewall().catch((e: unknown) => e);
    t.ok(err instanceof MeshpError);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_UNKNOWN');
    t.match((err as MeshpError).message, /ufw/);
  });

  t.test('an opening through ufw: reachable from its range only, marked, idempotent, removed alone', async (t) => {
    const bed = await ufwBed(t);
    await bed.ufw('--force', 'enable');
    await bed.ufw('allow', '8080/tcp');
    const fw = new UfwDriver({ runner: bed.runner, root: bed.dir, privateRange: ADDR.privateRange });
    t.ok(await reach(bed.client, ADDR.server, 8080));
    t.notOk(await reach(bed.client, ADDR.server, 9090));
    const o = open({ port: 9090, path: 'incoming', from: [ADDR.privateRange] });
    t.same(await fw.ensure([o], []), { added: [o.id], removed: [] });
    t.ok(await reach(bed.client, ADDR.server, 9090), 'reachable from the range');
    t.notOk(await reach(bed.outside, ADDR.serverOut, 9090), 'not from outside');
    t.match(await bed.ufw('status'), /9090\/tcp\s+ALLOW\s+10\.71\.1\.0\/24\s+# meshp:web\/incoming\/tcp\/9090/);
    t.same(await fw.ensure([o], []), { added: [], removed: [] }, 'idempotent');
    t.same(await fw.openings(), [o]);
    const r = open({ id: 'mesh/store', module: 'mesh', port: 5432, path: 'forwarded', action: 'drop' });
    await fw.ensure([o], [r]);
    t.same(await fw.openings(), [r, o], 'the refusal reads back as written: from anywhere outside the private range');
    t.match(await bed.ufw('status', 'numbered'), /\[ 1\] 5432\/tcp\s+ALLOW FWD\s+10\.71\.1\.0\/24\s+# meshp:mesh\/store\n\[ 2\] 5432\/tcp\s+DENY FWD\s+Anywhere/, 'its allow from the range sits above its deny');
    t.same(await fw.ensure([], [r]), { added: [], removed: [o.id] });
    const status = await bed.ufw('status');
    t.match(status, /8080\/tcp\s+ALLOW\s+Anywhere/, "the admin's rule stays");
    t.notOk(status.includes('9090'), 'only our rule went');
    t.notOk(await reach(bed.client, ADDR.server, 9090));
  });

  t.test('retire stops ufw without touching /etc/ufw; reenable starts it again', async (t) => {
    const bed = await ufwBed(t);
    await bed.ufw('--force', 'enable');
    await bed.ufw('allow', '8080/tcp');
    const fw = new UfwDriver({ runner: bed.runner, root: bed.dir });
    const hash = await bed.configHash();
    const state = await fw.retire();
    t.ok(await reach(bed.outside, ADDR.serverOut, 9090), 'nothing filters after retire');
    t.equal(await bed.configHash(), hash, '/etc/ufw byte-identical');
    await fw.reenable(state);
    t.notOk(await reach(bed.outside, ADDR.serverOut, 9090), 'filtering again');
    t.ok(await reach(bed.outside, ADDR.serverOut, 8080));
    t.equal(await bed.configHash(), hash);
  });
}
