// Issue 33 item 2: `module assign m2 tunnel --yes` was accepted though m2 has no setting
// `ports.tunnel`; the controller then could not encode m2's declaration ("{{ports.tunnel}}" where
// the wire carries a number), the agent looped on "Error serializing response" and went SILENT,
// and no controller log line said why. Now, against a real controller over gRPC on 127.0.0.1 whose
// catalogue is made as genesis makes it (placeholders kept): the assignment is refused at the admin
// call, naming the setting, nothing is stored, and the node's stream still gets its deltas; an
// assignment stored before this check (a state from before it) is logged when its delta does not
// encode, and its take is refused the same way.
import t from 'tap';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Controller, CONTROLLER_DB, SqliteControllerStore } from '@meshp/controller';
import { adminCalls, meshpAsync, startController, tokenFor, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { RawAgent, type RawSession } from '../helpers/raw-agent.js';
import { until } from '../helpers/budget.js';

/** The controller's state, changed as a library would (genesis does it so): only while no controller serves it. */
function withState(state: string, fn: (c: Controller) => void): void {
  const c = new Controller(new SqliteControllerStore(join(state, CONTROLLER_DB)));
  try {
    fn(c);
  } finally {
    c.close();
  }
}

const declared = (s: RawSession): string[][] => s.deltas.filter((d) => d.declaration).map((d) => d.declaration!.modules.map((m) => m.name));

t.test('a module naming a setting the node lacks is refused at assign and take', async (t) => {
  const dir = workdir(t, 'unfilled');
  const state = join(dir, 'ctl');
  mkdirSync(state, { recursive: true, mode: 0o700 });
  // The catalogue as genesis defines it: the tunnel module's port is the node's setting ports.tunnel.
  withState(state, (c) => {
    c.createNetwork('default');
    c.defineModule('default', {
      name: 'tunnel',
      files: [],
      containers: [],
      openings: [{ port: '{{ports.tunnel}}', protocol: 'udp', path: 'incoming', from: [] }],
    } as never);
    c.defineModule('default', { name: 'motd', files: [{ path: '/etc/motd', content: 'hello\n' }], containers: [], openings: [] });
  });
  let ctl: ControllerProc = await startController(t, state);
  const cli = (...args: string[]) => meshpAsync(...args, '--state', ctl.state, '--controller', ctl.address);
  const admin = adminCalls(() => ctl);

  const raw = new RawAgent(ctl);
  t.teardown(() => raw.link.close());
  await raw.enrol(await tokenFor(ctl), 'm2');
  const s = raw.open();
  await until('the first snapshot', () => s.deltas.length > 0, 30);
  const before = await (await ctl.admin!()).call('showNode', { network: 'default', node: 'm2' });

  const assign = await cli('module', 'assign', 'm2', 'tunnel', '--yes');
  t.equal(assign.code, 1, 'the assignment is refused');
  t.match(
    assign.err,
    /^MESHP_SETTING_MISSING: module tunnel names \{\{ports\.tunnel\}\}, and node m2 has no setting ports\.tunnel/,
    'with its code, naming the setting and the node',
  );
  const after = await (await ctl.admin!()).call('showNode', { network: 'default', node: 'm2' });
  t.same(after.node?.assignedModules, [], 'nothing was assigned');
  t.equal(after.node?.stateVersion, before.node?.stateVersion, 'nothing was stored: the state version did not move');

  // The node's declaration still encodes: its stream gets the next change.
  t.equal((await cli('module', 'assign', 'm2', 'motd', '--yes')).code, 0, 'another module is assigned');
  await until('a delta with motd', () => declared(s).some((names) => names.includes('motd')), 30);
  t.same(s.errors, [], 'the stream was not ended');
  t.notOk(
    ctl.proc.lines.some((l) => /not encoded/.test(String(l.msg))),
    'no delta failed to encode',
  );

  // A state from before the check: tunnel assigned to m2 as it was accepted then. The controller says why m2 gets nothing.
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
  withState(state, (c) => c.updateMember('default', 'm2', { assigned: ['motd', 'tunnel'] }));
  ctl = await startController(t, state, [], ctl.address);
  const s2 = raw.open();
  const line = await ctl.proc.waitFor((l) => l.msg === 'delta not encoded: the stream ends, the agent gets nothing', 30_000);
  t.match(
    line,
    { level: 50, code: 'MESHP_INTERNAL', network: 'default', node: 'm2', message: /invalid uint32/ },
    'an error line names the node and why its delta did not encode',
  );
  await s2.closed;

  const take = await cli('module', 'take', 'm2', 'tunnel', '--yes');
  t.equal(take.code, 1, 'its take is refused');
  t.match(take.err, /^MESHP_SETTING_MISSING: module tunnel names \{\{ports\.tunnel\}\}, and node m2 has no setting ports\.tunnel/, 'naming the setting');
  t.same((await (await ctl.admin!()).call('showNode', { network: 'default', node: 'm2' })).node?.takenModules, [], 'nothing taken');

  // Unassigned, m2's declaration encodes again: its stream gets the next change (its view is the one it
  // applied before, so the unassignment alone sends it nothing).
  await admin.unassign('m2', 'tunnel');
  const s3 = raw.open();
  await admin.catalogue([{ name: 'issue', files: [{ path: '/etc/issue', content: 'meshp\n' }] }]);
  await admin.assign('m2', 'issue');
  await until('a delta with issue and motd', () => declared(s3).some((names) => names.join() === 'issue,motd'), 30);
  t.same(s3.errors, [], 'the stream was not ended');
  t.equal(ctl.proc.lines.filter((l) => /not encoded/.test(String(l.msg))).length, 1, 'and no other delta failed to encode');
});
