/**
 * A node's state is its agent's word (issue 11 case 1): a flip recorded and then refused by the agent
 * shows as adopted and refused everywhere — in the controller's status, `node list`'s table, `node
 * show` and doctor's verdict — never as converged. Only the agent's report of the flip makes it converged.
 */
import t from 'tap';
import { Controller, MemoryStore, convergeNode, nodeToWire, withLiveness, type ReportedState } from '@meshp/controller';
import type { ReportMessage } from '@meshp/core';
import { DeltaApplier } from '@meshp/core/delta';
import { wire as pb } from '@meshp/transport-grpc';
import { lifecycleNote, nodeDetail, nodesTable, type WireNodeStatus } from '../../bin/src/remote/render.js';
import { verdictOf } from '../../bin/src/remote/ops.js';

const NET = 'n';
const report: ReportMessage = {
  appliedVersion: 3,
  mode: 'adopted',
  firewallKind: 'nftables',
  firewallActive: true,
  resources: [],
  at: '2026-01-01T00:00:00Z',
  firewallTables: ['inet filter'],
  listening: [{ protocol: 'tcp', address: '0.0.0.0', port: 9000, process: 'busybox', pid: 11 }],
  published: [],
};

function wire(c: Controller, connected = true): WireNodeStatus {
  return pb.NodeStatus.fromPartial(nodeToWire(withLiveness(c.listNodes(NET)[0]!, { connected, lastSeen: '2026-01-01T00:00:05Z' }), null));
}

/** The agent applies and acks everything sent: gap 0. */
function ackAll(c: Controller, node: string): void {
  const agent = new DeltaApplier();
  for (let d = c.deltaFor(NET, node); d; d = c.deltaFor(NET, node)) {
    const r = agent.receive(structuredClone(d));
    if (r.status === 'applied') c.ack(NET, node, r.ack.appliedVersion, r.ack.stateHash);
  }
}

const reported = (version: number, lifecycle: ReportedState['lifecycle'], extra: Partial<ReportedState> = {}): ReportedState => ({
  version,
  mode: 'adopted',
  at: '2026-01-01T00:00:05Z',
  refusedResources: 0,
  ...(lifecycle ? { lifecycle } : {}),
  reconcile: { result: 'ok', code: '', message: '', at: '2026-01-01T00:00:05Z', refusedResources: 0 },
  ...extra,
});

t.test('recorded, refused by the agent: adopted and refused in every view; reported done: converged', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.join(NET, { id: 'm1', nodeKey: 'k', mode: 'adopted' });
  c.report(NET, 'm1', {
    firewallKind: 'nftables',
    reported: reported(c.stateVersion(NET), { state: 'adopted', previewId: '', code: '', message: '', at: '' }),
  });
  const { preview, stateVersion } = convergeNode(c, NET, 'm1', report);
  let n = wire(c);
  t.match(n, { mode: 1, requestedMode: 2, status: 'changing', transition: { state: 'requested', version: stateVersion } }, 'recorded is only requested');
  t.match(lifecycleNote(n), /requested, not reported yet/);

  const stale = { state: 'refused', previewId: preview.id, code: 'MESHP_PREVIEW_STALE', message: 'the machine changed', at: '' };
  c.report(NET, 'm1', { reported: reported(stateVersion, stale) });
  n = wire(c);
  t.match(n, { mode: 1, requestedMode: 2, status: 'refusing', transition: { state: 'refused', code: 'MESHP_PREVIEW_STALE' } });
  t.notMatch(nodesTable([n]), /converged/, 'node list does not say converged');
  t.match(nodesTable([n]), /^m1\s+REFUSING\s+ADOPTED/m);
  t.notMatch(nodeDetail(n), /: converged/, 'node show does not say converged');
  t.match(nodeDetail(n), /ADOPTED by its agent's last report; converged asked/);
  t.match(verdictOf(n, true), /^refusing: flip refused: MESHP_PREVIEW_STALE/, "doctor's verdict names the refusal");

  const converge2 = convergeNode(c, NET, 'm1', report);
  t.match(wire(c).transition, { state: 'requested' }, 'a new request is requested again, not refused by the old report');
  c.report(NET, 'm1', { reported: reported(converge2.stateVersion, { state: 'flipping', previewId: converge2.preview.id, code: '', message: '', at: '' }) });
  t.match(wire(c), { mode: 1, transition: { state: 'in-progress' } }, 'a running flip is still adopted');
  c.report(NET, 'm1', {
    reported: reported(converge2.stateVersion, { state: 'converged', previewId: converge2.preview.id, code: '', message: '', at: '' }, { mode: 'converged' }),
  });
  ackAll(c, 'm1');
  t.match(wire(c), { mode: 2, gap: 0, status: 'ok', transition: { state: 'done' } }, 'converged once the agent says so');
  t.match(verdictOf(wire(c), true), /^in sync/);
});

t.test('a converged enrolment the agent refuses (a machine in use) is refused, not converged; a silent node is silent', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.join(NET, { id: 'm2', nodeKey: 'k', mode: 'converged' });
  t.match(wire(c), { mode: 0, status: 'pending' }, 'no report: no mode shown');
  c.report(NET, 'm2', { reported: reported(1, { state: 'refused', previewId: '', code: 'MESHP_MACHINE_IN_USE', message: 'in use', at: '' }) });
  t.match(wire(c), { mode: 1, requestedMode: 2, status: 'refusing', transition: { state: 'refused', code: 'MESHP_MACHINE_IN_USE' } });
  t.match(wire(c, false), { status: 'silent', statusDetail: /last seen 2026-01-01T00:00:05Z/ });
  c.report(NET, 'm2', { reported: reported(1, { state: 'adopted', previewId: '', code: '', message: '', at: '' }, { refusedResources: 2 }) });
  t.match(wire(c), { refusedResources: 2, status: 'refusing', statusDetail: '2 resource(s) refused' });
});
