import { NetworkState, PolicyIndex, affectedBy, noteChange, type LogEntry, type MemberRecord } from '@meshp/core/delta';
import { newSync } from './status.js';
import type { RemoteChange } from './store.js';

/**
 * What another controller sharing the store committed (store-postgres), applied to this one's
 * memory: the network's record as committed, its log entries in order, and the memberships they
 * changed (a node that joined there gets a fresh sync record here; its own is read again from the
 * store when its stream opens here). A network this controller did not know, or one whose log no
 * longer reaches back to the version it held, is taken whole.
 */
export function applyRemote(networks: Map<string, NetworkState>, c: RemoteChange): void {
  if (!c.record) {
    networks.delete(c.network);
    return;
  }
  let net = networks.get(c.network);
  if (!net) networks.set(c.network, (net = new NetworkState(c.record)));
  const was = net.version;
  const added: LogEntry[] = [];
  const put = (id: string, after: MemberRecord | null) => {
    if (after) {
      net.putMember(after);
      if (!net.sync.has(id)) net.sync.set(id, newSync());
    } else {
      net.deleteMember(id);
      net.sync.delete(id);
    }
  };
  if (c.members) {
    const ids = new Set(c.members.map((m) => m.id));
    for (const id of [...net.members.keys()]) if (!ids.has(id)) put(id, null);
    for (const m of c.members) put(m.id, m);
    net.log = [...c.entries];
  } else {
    for (const e of c.entries) {
      if (e.version <= net.version && net.log.some((x) => x.version === e.version)) continue;
      if (e.kind === 'member') put(e.id, e.after);
      else if (e.kind === 'members') for (const x of e.changes) put(x.id, x.after);
      net.log.push(e);
      added.push(e);
    }
  }
  net.record = c.record;
  net.policy = new PolicyIndex(c.record.policy);
  net.log = net.log.filter((e) => e.version > c.record!.logFloor && e.version <= c.record!.version).sort((a, b) => a.version - b.version);
  // Whom the changes concern, noted as for one made here (sync.ts noteChange); taken whole, or with
  // versions missing between the one held and the one committed: every view may have moved.
  added.sort((a, b) => a.version - b.version);
  const whole = !!c.members || added.length !== net.version - was || added.some((e, i) => e.version !== was + 1 + i);
  if (whole) net.touch(net.version, null);
  else if (added.length > 0) noteChange(net, was, net.version, affectedBy(net, added));
}
