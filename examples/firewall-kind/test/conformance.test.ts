/**
 * The ufw kind against @meshp/testkit's firewall conformance suite, on the kit's namespaces, then
 * what is particular to ufw (the iptables plugin leaving ufw's chains to it, a refusal written as an
 * allow above a deny, retire leaving /etc/ufw byte-identical). This is the test a plugin author
 * copies: a `setup` that loads a found firewall of the kind and hands the kit the plugin.
 */
import t from 'tap';
import { isMeshpError, type Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { IptablesPlugin } from '@meshp/firewall-iptables';
import { ADDRESSES, FOUND_PORT, MESH_PORT, firewallConformance, labUnavailable, type KitLab } from '@meshp/testkit';
import { UfwDriver, UfwPlugin } from '../src/index.js';
import { machineUfwHash, ufwLab, type UfwLab } from './ufw-lab.js';

const why = labUnavailable();
if (why) t.plan(0, why);
else {
  const machine = await machineUfwHash();
  t.teardown(async () => {
    if ((await machineUfwHash()) !== machine) throw new Error("the machine's own ufw state changed");
  });

  t.test('ufw', async (t) => {
    // The kit's lab and ufw's copy in it, kept for the checks particular to ufw, which run after the kit's.
    let bed: { l: KitLab; u: UfwLab } | undefined;
    firewallConformance(t, {
      kind: 'ufw',
      async setup(l) {
        const u = await ufwLab(l);
        bed = { l, u };
        await u.ufw('--force', 'enable');
        await u.ufw('allow', `${FOUND_PORT}/tcp`);
        return {
          plugin: new UfwPlugin({ runner: u.runner, privateRange: ADDRESSES.privateRange }),
          reload: async () => void (await u.ufw('reload')),
          foundRules: async () => (await u.ufw('status', 'verbose')).split('\n').filter((l) => l && !l.includes('meshp:')),
        };
      },
    });
    const lab = () => {
      if (!bed) throw new Error('the kit made no lab');
      return bed;
    };

    t.test('the iptables plugin leaves ufw to this plugin, and without it adoption is refused naming ufw', async (t) => {
      const { l, u } = lab();
      const both = new Host({ root: l.root }).use(new IptablesPlugin({ runner: u.runner }), new UfwPlugin({ runner: u.runner }));
      t.equal((await both.firewall())?.kind, 'ufw');
      const err = await new Host({ root: l.root })
        .use(new IptablesPlugin({ runner: u.runner }))
        .firewall()
        .catch((e: unknown) => e);
      t.ok(isMeshpError(err, 'MESHP_FIREWALL_UNKNOWN'), 'MESHP_FIREWALL_UNKNOWN');
      t.match(String((err as Error).message), /ufw/);
    });

    t.test('an opening is a commented ufw rule; a refusal is an allow from the private range above a deny', async (t) => {
      const { l, u } = lab();
      const fw = new UfwDriver({ runner: u.runner, root: l.root, privateRange: ADDRESSES.privateRange });
      const o: Opening = {
        id: `web/incoming/tcp/${MESH_PORT}`,
        module: 'web',
        port: MESH_PORT,
        protocol: 'tcp',
        from: [ADDRESSES.privateRange],
        path: 'incoming',
        action: 'accept',
      };
      const r: Opening = { id: 'mesh/store', module: 'mesh', port: 5432, protocol: 'tcp', from: [], path: 'forwarded', action: 'drop' };
      await fw.ensure([o], [r]);
      const range = ADDRESSES.privateRange.replace(/\./g, '\\.');
      t.match(await u.ufw('status'), new RegExp(`${MESH_PORT}/tcp\\s+ALLOW\\s+${range}\\s+# meshp:web/incoming/tcp/${MESH_PORT}`));
      t.same(await fw.openings(), [r, o], 'both read back as written: the refusal from anywhere outside the private range');
      t.match(
        await u.ufw('status', 'numbered'),
        new RegExp(`\\[ 1\\] 5432/tcp\\s+ALLOW FWD\\s+${range}\\s+# meshp:mesh/store\\n\\[ 2\\] 5432/tcp\\s+DENY FWD\\s+Anywhere`),
        'its allow sits above its deny',
      );
      t.same(await fw.ensure([], []), { added: [], removed: ['mesh/store', o.id] });
      t.match(await u.ufw('status'), new RegExp(`${FOUND_PORT}/tcp\\s+ALLOW\\s+Anywhere`), "the admin's rule stays");
    });

    t.test('retire stops ufw leaving /etc/ufw byte-identical; reenable starts it again', async (t) => {
      const { l, u } = lab();
      const fw = new UfwDriver({ runner: u.runner, root: l.root });
      const hash = await u.configHash();
      const state = await fw.retire();
      t.ok(await l.reaches('outside', MESH_PORT), 'nothing filters after retire');
      t.equal(await u.configHash(), hash, '/etc/ufw byte-identical');
      await fw.reenable(state);
      t.notOk(await l.reaches('outside', MESH_PORT), 'filtering again');
      t.equal(await u.configHash(), hash);
    });
  });
}
