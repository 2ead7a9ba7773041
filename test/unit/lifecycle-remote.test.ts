/** The controller's side of converging a node: the preview from the last report, the flip recorded only for it. */
import t from 'tap';
import { isMeshpError, type ReportMessage, type WireDeclaration } from '@meshp/core';
import { DeltaApplier, WIRE_MODE, declarationFromWire } from '@meshp/core/delta';
import { validateDeclaration } from '@meshp/core/reconcile';
import { buildPreview } from '@meshp/core/lifecycle';
import { Controller, MemoryStore, convergeNode, factsOfReport, previewOf } from '@meshp/controller';

const NET = 'n';

function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.defineModule(NET, { name: 'web', openings: [{ port: 8080, path: 'incoming', from: ['10.70.1.0/24'] }] });
  c.join(NET, { id: 'n1', nodeKey: 'k1', mode: 'adopted' });
  c.assignModule(NET, 'n1', 'web');
  return c;
}

function report(extra: Partial<ReportMessage> = {}): ReportMessage {
  return {
    appliedVersion: 3,
    mode: 'adopted',
    firewallKind: 'nftables',
    firewallActive: true,
    resources: [],
    at: '2026-01-01T00:00:00Z',
    firewallTables: ['inet filter'],
    firewallConfigFile: '/etc/nftables.conf',
    listening: [
      { protocol: 'tcp', address: '0.0.0.0', port: 8080, process: 'busybox', pid: 10 },
      { protocol: 'tcp', address: '0.0.0.0', port: 9000, process: 'busybox', pid: 11 },
      { protocol: 'tcp', address: '127.0.0.1', port: 7000, process: 'node', pid: 12 },
    ],
    published: [],
    ...extra,
  };
}

/** Every delta the node is sent from here on, applied; the declarations they carry. */
function declarationsSent(c: Controller, agent: DeltaApplier): WireDeclaration[] {
  const out: WireDeclaration[] = [];
  for (;;) {
    const d = c.deltaFor(NET, 'n1');
    if (!d) return out;
    const r = agent.receive(structuredClone(d));
    if (r.status === 'applied') c.ack(NET, 'n1', r.ack.appliedVersion, r.ack.stateHash);
    if (d.declaration) out.push(d.declaration);
  }
}

t.test('a stale preview id is refused with MESHP_PREVIEW_STALE and records nothing', async (t) => {
  const c = setup();
  const version = c.stateVersion(NET);
  t.throws(() => convergeNode(c, NET, 'n1', report(), 'deadbeefdeadbeef'), { code: 'MESHP_PREVIEW_STALE' });
  const before = previewOf(c, NET, 'n1', report());
  // The node's machine changed since the operator's preview: a new listener.
  const moved = report({ listening: [...report().listening!, { protocol: 'tcp', address: '0.0.0.0', port: 9001, process: 'x', pid: 13 }] });
  t.throws(() => convergeNode(c, NET, 'n1', moved, before.id), { code: 'MESHP_PREVIEW_STALE' });
  t.equal(c.stateVersion(NET), version, 'no change recorded');
  t.equal(c.member(NET, 'n1')!.mode, 'adopted');
  t.equal(c.declarationOf(NET, 'n1').mode, WIRE_MODE.ADOPTED);
});

t.test('a node that has not reported cannot be previewed or flipped', async (t) => {
  const c = setup();
  t.throws(() => previewOf(c, NET, 'n1', null), { code: 'MESHP_LIFECYCLE' });
  t.throws(() => convergeNode(c, NET, 'n1', null), { code: 'MESHP_LIFECYCLE' });
});

t.test('the preview from a report names the declared port, the one that closes and the local one', async (t) => {
  const p = previewOf(setup(), NET, 'n1', report());
  const by = Object.fromEntries(p.items.map((i) => [i.port, i]));
  t.match(by[8080], { declaredBy: 'web', after: 'open', holder: 'busybox (pid 10)', from: ['10.70.1.0/24'] });
  t.match(by[9000], { declaredBy: null, after: 'closes' });
  t.match(by[7000], { after: 'local' });
  t.same(p.take, ['web']);
  t.match(p.firewall, { kind: 'nftables', active: true, tables: ['inet filter'], configFile: '/etc/nftables.conf' });
});

t.test('the id the controller computes is the id the agent computes from the declaration it receives and the same facts', async (t) => {
  const c = setup();
  const agent = new DeltaApplier();
  declarationsSent(c, agent);
  const { preview } = convergeNode(c, NET, 'n1', report());
  const [wire] = declarationsSent(c, agent);
  const onAgent = buildPreview({ declaration: validateDeclaration(declarationFromWire(wire!)), ...factsOfReport(report()) });
  t.equal(onAgent.id, preview.id);
});

t.test('the preview from a report says where each door is reachable now; a report without reach says unknown', async (t) => {
  const reach = [
    { port: 8080, protocol: 'tcp', path: 'incoming', now: 'open', from: [], mentioned: true },
    { port: 9000, protocol: 'tcp', path: 'incoming', now: 'open-from', from: ['10.70.1.0/24'], mentioned: false },
    { port: 9001, protocol: 'tcp', path: 'incoming', now: 'sideways', from: [], mentioned: false },
  ];
  const listening = [...report().listening!, { protocol: 'tcp', address: '0.0.0.0', port: 9001, process: 'x', pid: 13 }];
  const p = previewOf(setup(), NET, 'n1', report({ reach, listening }));
  const by = Object.fromEntries(p.items.map((i) => [i.port, i]));
  t.match(by[8080], { now: 'open', mentioned: true });
  t.notOk('nowFrom' in by[8080]!);
  t.match(by[9000], { now: 'open-from', nowFrom: ['10.70.1.0/24'], mentioned: false });
  t.match(by[9001], { now: 'unknown' }, 'an answer this end does not know is not guessed');
  t.match(by[7000], { now: 'local' });
  const old = previewOf(setup(), NET, 'n1', report());
  t.match(Object.fromEntries(old.items.map((i) => [i.port, i]))[8080], { now: 'unknown' });
  const local = buildPreview({
    declaration: validateDeclaration(declarationFromWire(setup().declarationOf(NET, 'n1'))),
    ...factsOfReport(report({ listening })),
    reach: [
      { port: 8080, protocol: 'tcp', path: 'incoming', now: 'open', mentioned: true },
      { port: 9000, protocol: 'tcp', path: 'incoming', now: 'open-from', from: ['10.70.1.0/24'], mentioned: false },
    ],
  });
  t.equal(p.id, local.id, 'the same id the agent computes from what its driver answered');
});

t.test('after the flip every declaration carries mode converged and the preview id; adopting clears both', async (t) => {
  const c = setup();
  const agent = new DeltaApplier();
  declarationsSent(c, agent);
  const id = previewOf(c, NET, 'n1', report()).id;
  const { preview, stateVersion } = convergeNode(c, NET, 'n1', report(), id);
  t.equal(preview.id, id);
  t.equal(stateVersion, c.stateVersion(NET));
  t.match(c.member(NET, 'n1'), { mode: 'converged', convergePreviewId: id });
  // Asked, not done: the mode shown is the agent's word, and it has not reported.
  t.match(c.listNodes(NET)[0], {
    mode: 'unknown',
    requestedMode: 'converged',
    convergePreviewId: id,
    transition: { state: 'requested', mode: 'converged', version: stateVersion },
  });

  const sent: WireDeclaration[] = [...declarationsSent(c, agent)];
  c.defineModule(NET, { name: 'web', openings: [{ port: 8080, path: 'incoming', from: ['10.70.0.0/16'] }] });
  sent.push(...declarationsSent(c, agent));
  c.defineModule(NET, { name: 'db', files: [{ path: '/etc/db.conf', content: 'x\n' }] });
  c.assignModule(NET, 'n1', 'db');
  sent.push(...declarationsSent(c, agent));
  c.takeModule(NET, 'n1', 'db');
  sent.push(...declarationsSent(c, agent));
  c.setTags(NET, 'n1', ['edge']);
  sent.push(...declarationsSent(c, agent));
  t.ok(sent.length >= 4, `declarations sent after the flip: ${sent.length}`);
  for (const d of sent) t.match(d, { mode: WIRE_MODE.CONVERGED, convergePreviewId: id });
  t.match(c.snapshotOf(NET, 'n1').delta.declaration, { mode: WIRE_MODE.CONVERGED, convergePreviewId: id }, 'a snapshot too');
  t.match(agent.view.components.declaration, { mode: WIRE_MODE.CONVERGED, convergePreviewId: id }, "and the agent's view");

  c.setMode(NET, 'n1', 'adopted');
  const [back] = declarationsSent(c, agent);
  t.equal(back!.mode, WIRE_MODE.ADOPTED);
  t.notOk(back!.convergePreviewId, 'adopted: no preview id');
  t.equal(c.listNodes(NET)[0]!.convergePreviewId, '');
});

t.test('a node that reported itself converged is not flipped again', async (t) => {
  const c = setup();
  const { preview } = convergeNode(c, NET, 'n1', report());
  const err = t.throws(() => convergeNode(c, NET, 'n1', report({ lifecycle: { state: 'converged', previewId: preview.id, steps: [], at: '' } })));
  t.ok(isMeshpError(err, 'MESHP_LIFECYCLE'));
  // Refused on the machine (it changed since): the operator previews again and records the new preview.
  const again = convergeNode(
    c,
    NET,
    'n1',
    report({ lifecycle: { state: 'refused', previewId: preview.id, steps: [], code: 'MESHP_PREVIEW_STALE', at: '' }, firewallActive: false }),
  );
  t.not(again.preview.id, preview.id);
  t.equal(c.member(NET, 'n1')!.convergePreviewId, again.preview.id);
});
