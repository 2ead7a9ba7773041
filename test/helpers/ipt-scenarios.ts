/** The same scenarios for both iptables backends, each on its own lab bed (ipt-lab.ts). */
import type { Test } from 'tap';
import type { Opening } from '@meshp/core';
import { IptablesDriver, nsenterRunner, type CommandRunner } from '@meshp/firewall-iptables';
import { ADDR, iptLab, lineDiff, tool, type Backend, type IptLab } from './ipt-lab.js';

export function opening(o: Partial<Opening> & Pick<Opening, 'port' | 'path'>): Opening {
  const protocol = o.protocol ?? 'tcp';
  const module = o.module ?? 'web';
  return { id: o.id ?? `${module}/${o.path}/${protocol}/${o.port}`, module, protocol, from: [], action: 'accept', ...o };
}

export function driverFor(lab: IptLab): IptablesDriver {
  return new IptablesDriver(lab.backend, { runner: nsenterRunner(lab.server.path), root: lab.root, privateRange: ADDR.privateRange });
}

const marked = (lines: string[]) => lines.every((l) => /--comment "?meshp:/.test(l));

export function iptScenarios(tap: Test, backend: Backend): void {
  tap.test(`${backend}: an opening makes its port reachable from its range only, adding only marked rules`, async (t) => {
    const lab = await iptLab(t, backend);
    const fw = driverFor(lab);
    t.ok(await lab.reach(lab.client, ADDR.server, 8080), 'the found firewall allows 8080');
    t.notOk(await lab.reach(lab.client, ADDR.server, 9090), '9090 is closed before');
    const before4 = await lab.save(4);
    const before6 = await lab.save(6);
    const wanted = [opening({ port: 9090, path: 'incoming', from: [ADDR.privateRange, 'fd71:1::/64'] })];
    const res = await fw.ensure(wanted, []);
    t.same(res, { added: ['web/incoming/tcp/9090'], removed: [] });
    t.ok(await lab.reach(lab.client, ADDR.server, 9090), 'reachable from the private range');
    t.ok(await lab.reach(lab.client, ADDR.server6, 9090), 'reachable over IPv6 from its range');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 9090), 'not reachable from outside');
    t.ok(await lab.reach(lab.outside, ADDR.serverOut, 8080), 'the found rules still work');
    const d4 = lineDiff(before4, await lab.save(4));
    const d6 = lineDiff(before6, await lab.save(6));
    t.same(d4.removed, []);
    t.same(d6.removed, []);
    t.equal(d4.added.length, 1);
    t.equal(d6.added.length, 1);
    t.ok(marked([...d4.added, ...d6.added]), 'every added rule carries the mark');
    const input = (await lab.save(4)).split('\n').filter((l) => l.startsWith('-A INPUT'));
    const ours = input.findIndex((l) => l.includes('meshp:'));
    t.ok(input[ours - 1]?.includes('--dport 8080') === false && input[ours + 1]?.includes('REJECT'), 'placed just before the first drop point');
    t.ok(
      input.slice(0, ours).some((l) => l.includes('INVALID')),
      'after the ct invalid drop, not at the head',
    );
    const again = await fw.ensure(wanted, []);
    t.same(again, { added: [], removed: [] }, 'a second ensure changes nothing');
    t.equal(fw.noopHits, 0, 'planned (its answer kept for the next)');
    t.same(await fw.ensure(wanted, []), { added: [], removed: [] });
    t.equal(fw.noopHits, 1, "the same tables and ask: the last no-op's answer, not planned again (the misses: the scenarios below)");
    // Traffic moves a chain's counters, which no plan reads: still the kept answer, from the saves' text.
    const output = async () => /^:OUTPUT .*$/m.exec((await lab.server.exec(tool(backend, 4, 'save'), ['-t', 'filter'])).stdout)?.[0];
    const counted = await output();
    t.ok(await lab.reach(lab.client, ADDR.server, 9090), "the server's answers pass its OUTPUT policy");
    t.not(await output(), counted, 'the counters moved');
    t.same(await fw.ensure(wanted, []), { added: [], removed: [] });
    t.equal(fw.noopHits, 2, 'counters aside, the same saves: the kept answer');
    // Someone else's rule, anywhere in the table: planned again (and still nothing to change).
    await lab.add('*filter\n-A OUTPUT -p tcp -m tcp --dport 9999 -j ACCEPT\nCOMMIT\n');
    t.same(await fw.ensure(wanted, []), { added: [], removed: [] });
    t.equal(fw.noopHits, 2, 'a rule more: not the kept answer');
    t.same(await fw.ensure(wanted, []), { added: [], removed: [] });
    t.equal(fw.noopHits, 3, 'and that plan is the one kept next');
    t.same(await fw.openings(), [{ ...wanted[0], from: ['10.71.1.0/24', 'fd71:1::/64'] }]);
  });

  tap.test(`${backend}: a reload loses our rules, the next ensure restores them; removing one removes only its rule`, async (t) => {
    const lab = await iptLab(t, backend);
    const fw = driverFor(lab);
    const a = opening({ port: 9090, path: 'incoming', from: [ADDR.privateRange] });
    const b = opening({ port: 9091, path: 'incoming' });
    const found = await lab.save(4);
    await fw.ensure([a, b], []);
    t.same(await fw.ensure([a, b], []), { added: [], removed: [] }, 'nothing to do: its answer kept');
    await lab.reload();
    t.same(await fw.openings(), [], 'the reload dropped them');
    t.notOk(await lab.reach(lab.client, ADDR.server, 9090));
    t.same((await fw.ensure([a, b], [])).added, [a.id, b.id]);
    t.ok(await lab.reach(lab.client, ADDR.server, 9090), 'back after the next ensure');
    const withBoth = await lab.save(4);
    const res = await fw.ensure([a], []);
    t.same(res, { added: [], removed: [b.id] });
    const d = lineDiff(withBoth, await lab.save(4));
    t.same(d.added, []);
    t.equal(d.removed.length, 1);
    t.match(d.removed[0], /meshp:web\/incoming\/tcp\/9091/);
    t.same(lineDiff(found, await lab.save(4)).removed, [], 'no found rule was touched');
    await fw.ensure([], []);
    t.equal(await lab.save(4), found, 'with nothing wanted, the ruleset is the found one again');
  });

  tap.test(`${backend}: a forwarded opening covers a DNAT'ed (published) port through FORWARD`, async (t) => {
    const lab = await iptLab(t, backend);
    const fw = driverFor(lab);
    t.notOk(await lab.reach(lab.client, ADDR.server, 18080), 'FORWARD drops the published port');
    await fw.ensure([opening({ port: 18080, path: 'forwarded', from: [ADDR.privateRange] })], []);
    t.match(await lab.save(4), /-A FORWARD .*--ctorigdstport 18080 .*meshp:web\/forwarded\/tcp\/18080/);
    t.ok(await lab.reach(lab.client, ADDR.server, 18080), 'published port reachable from the range');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 18080), 'not from outside');
  });

  tap.test(`${backend}: with DOCKER-USER, openings and refusals go there and the refusal closes the port to outside`, async (t) => {
    const lab = await iptLab(t, backend, { dockerish: true });
    const fw = driverFor(lab);
    t.ok(await lab.reach(lab.outside, ADDR.serverOut, 18080), 'published to everyone before');
    const nat = await lab.save(4, 'nat');
    const refusal = opening({ id: 'mesh/store', module: 'mesh', port: 18080, path: 'forwarded', action: 'drop' });
    await fw.ensure([opening({ port: 18080, path: 'forwarded', from: [ADDR.privateRange] })], [refusal]);
    const saved = await lab.save(4);
    t.match(
      saved,
      /-A DOCKER-USER ! -s 10\.71\.1\.0\/24 -p tcp -m conntrack --ctorigdstport 18080 --ctdir ORIGINAL -m comment --comment "?meshp:mesh\/store"? -j DROP/,
    );
    t.match(saved, /-A DOCKER-USER -s 10\.71\.1\.0\/24 .*--ctorigdstport 18080 .*-j ACCEPT/);
    t.notOk(/-A FORWARD .*meshp:/.test(saved), 'nothing of ours in FORWARD itself');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 18080), 'refused from outside the private range');
    t.ok(await lab.reach(lab.client, ADDR.server, 18080), 'still reachable from the private range');
    t.equal(await lab.save(4, 'nat'), nat, 'the nat table is untouched');
    const refusals = (await fw.openings()).filter((o) => o.action === 'drop');
    t.same(refusals, [{ ...refusal, from: [] }]);
  });

  tap.test(`${backend}: retire keeps the config byte-identical and Docker's rules; reenable brings the found rules back`, async (t) => {
    const lab = await iptLab(t, backend, { dockerish: true });
    const fw = driverFor(lab);
    const hash = await lab.configHash();
    await fw.ensure([opening({ port: 9090, path: 'incoming', from: [ADDR.privateRange] })], []);
    const before4 = await lab.save(4);
    const before6 = await lab.save(6);
    const nat = await lab.save(4, 'nat');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 9090));
    const state = await fw.retire();
    const retired = await lab.save(4);
    t.match(retired, /:INPUT ACCEPT/);
    t.match(retired, /:FORWARD DROP/, "Docker's FORWARD policy stays");
    t.match(retired, /-A DOCKER -d 10\.71\.3\.2\/32/, "Docker's rules stay");
    t.match(retired, /meshp:web\/incoming\/tcp\/9090/, 'our rules stay');
    // The mesh's accept keeps its `! --ctstate INVALID` (it stands as placed, for reenable): the found lines are read without it.
    t.notOk(
      /REJECT|INVALID/.test(
        retired
          .split('\n')
          .filter((l) => !l.includes('meshp:'))
          .join('\n'),
      ),
      'the found rules are gone',
    );
    t.notOk((await fw.describe()).active, 'no longer active');
    t.ok(await lab.reach(lab.outside, ADDR.serverOut, 9090), 'the found firewall no longer filters');
    t.equal(await lab.save(4, 'nat'), nat);
    t.equal(await lab.configHash(), hash, 'config byte-identical after retire');
    await fw.reenable(JSON.parse(JSON.stringify(state)) as typeof state);
    t.equal(await lab.save(4), before4, 'IPv4 filter exactly as before retire');
    t.equal(await lab.save(6), before6, 'IPv6 filter exactly as before retire');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 9090), 'filtering again');
    t.ok(await lab.reach(lab.client, ADDR.server, 9090), 'our opening still in force');
    await fw.reenable(state);
    t.equal(await lab.save(4), before4, 'reenable is idempotent');
    t.equal(await lab.configHash(), hash, 'config byte-identical after reenable');
  });

  tap.test(`${backend}: the derived filter drops by default and allows the openings; unload removes it`, async (t) => {
    const lab = await iptLab(t, backend, { dockerish: true });
    const fw = driverFor(lab);
    await fw.retire();
    const retired4 = await lab.save(4);
    const filter = {
      openings: [opening({ port: 9090, path: 'incoming', from: [ADDR.privateRange] }), opening({ port: 18080, path: 'forwarded', from: [ADDR.privateRange] })],
      refusals: [],
    };
    await fw.loadDerived(filter);
    await fw.loadDerived(filter);
    const saved = await lab.save(4);
    t.equal(saved.split('\n').filter((l) => l.includes('meshp:derived')).length, 2, 'one jump each, also after a second load');
    t.match(saved, /-A INPUT -m comment --comment "?meshp:derived"? -j MESHP-INPUT/);
    t.ok(await lab.reach(lab.client, ADDR.server, 9090), 'declared port open');
    t.notOk(await lab.reach(lab.client, ADDR.server, 8080), 'undeclared port closed');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 9090), 'declared port only from its range');
    t.ok(await lab.reach(lab.client, ADDR.server, 18080), 'declared published port open');
    t.notOk(await lab.reach(lab.outside, ADDR.serverOut, 18080), 'published port closed to others');
    await fw.unloadDerived();
    t.equal(await lab.save(4), retired4, 'unload leaves the ruleset as it was');
  });

  tap.test(`${backend}: the same derived filter again writes nothing; a changed filter, or a hand edit, loads it again`, async (t) => {
    const lab = await iptLab(t, backend);
    const inner = nsenterRunner(lab.server.path);
    const restores: string[] = [];
    const counting: CommandRunner = (cmd, args, input) => {
      if (/restore$/.test(cmd)) restores.push(cmd);
      return inner(cmd, args, input);
    };
    const fw = new IptablesDriver(lab.backend, { runner: counting, root: lab.root, privateRange: ADDR.privateRange });
    const filter = { openings: [opening({ port: 9090, path: 'incoming', from: [ADDR.privateRange] })], refusals: [] };
    await fw.loadDerived(filter);
    const loaded = restores.length;
    t.ok(loaded >= 1, `loaded (${loaded} restores, one per family)`);
    const saved = await lab.save(4);
    await fw.loadDerived(filter);
    await fw.loadDerived(structuredClone(filter));
    t.equal(restores.length, loaded, 'the same filter twice more: nothing written');
    t.equal(await lab.save(4), saved);

    const wider = { ...filter, openings: [...filter.openings, opening({ port: 9091, path: 'incoming' })] };
    await fw.loadDerived(wider);
    t.equal(restores.length, 2 * loaded, 'a changed filter is loaded');
    t.match(await lab.save(4), /-A MESHP-INPUT .*--dport 9091/);

    await lab.add('*filter\n-D MESHP-INPUT -p tcp -m tcp --dport 9091 -m comment --comment "meshp:web/incoming/tcp/9091" -j ACCEPT\nCOMMIT\n');
    t.notMatch(await lab.save(4), /--dport 9091/, 'a rule deleted by hand');
    await fw.loadDerived(wider);
    t.equal(restores.length, 3 * loaded, 'loaded again');
    t.match(await lab.save(4), /-A MESHP-INPUT .*--dport 9091/, 'the rule is back');
  });
}
