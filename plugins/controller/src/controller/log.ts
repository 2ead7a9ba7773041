/**
 * Versions and the change log: every change bumps its network's version, is logged, and is
 * persisted with what it changed in one store transaction; the log is bounded by its depth.
 */
import { affectedBy, noteChange, rescope, type LogEntry, type NetworkState } from '@meshp/core/delta';
import type { ControllerState } from './state.js';
import { usage } from '@meshp/core/util';

/** The change `entry` (its version set here), with `apply` writing what it changed, in one transaction; answers the new version. */
export function commit(s: ControllerState, net: NetworkState, entry: LogEntry, apply: () => void): number {
  s.store.transaction(() => {
    net.record.version += 1;
    const e = { ...entry, version: net.record.version } as LogEntry;
    net.log.push(e);
    apply();
    // Who it concerns, noted now (in memory: a restart counts every view as moved): the others are not looked at (sync.ts noteChange).
    noteChange(net, e.version - 1, e.version, affectedBy(net, [e]));
    s.store.appendLog(net.record.name, e);
    // The record is put once, after the log's floor moved (it holds the policy: 200 rules at 10,000 nodes in groups of 50).
    truncate(s, net, net.record.logDepth, false);
    s.store.putNetwork(net.record);
  });
  return net.record.version;
}

/** The network's version moved to one past `seen`, its log emptied: every agent's next answer is a snapshot. */
export function moveAhead(s: ControllerState, net: NetworkState, seen: number): { from: number; to: number } {
  const from = net.record.version;
  s.store.transaction(() => {
    net.record.version = seen + 1;
    net.touch(net.record.version, null);
    net.log = [];
    net.record.logFloor = net.record.version;
    s.store.truncateLog(net.record.name, net.record.logFloor);
    s.store.putNetwork(net.record);
  });
  return { from, to: net.record.version };
}

/** `put`: the network's record is written here (false: the caller writes it next, in the same transaction). */
export function truncate(s: ControllerState, net: NetworkState, keep: number, put = true): void {
  const drop = net.log.length - Math.max(0, keep);
  if (drop <= 0) return;
  net.log.splice(0, drop);
  net.record.logFloor = net.record.version - net.log.length;
  s.store.truncateLog(net.record.name, net.record.logFloor);
  if (put) s.store.putNetwork(net.record);
}

/** A network written under an older scope rule: its views checked once, those that differ snapshotted (sync.ts rescope). */
export function rescopeNetwork(s: ControllerState, net: NetworkState): void {
  const changed = rescope(net);
  s.store.transaction(() => {
    s.store.putNetwork(net.record);
    for (const id of changed) s.store.putSync(net.record.name, id, net.sync.get(id)!);
  });
}

export function setLogDepth(s: ControllerState, network: string, depth: number): void {
  if (!Number.isInteger(depth) || depth < 1) throw usage(`a log depth is a whole number of changes, 1 or more, not ${depth}`);
  const net = s.net(network);
  s.store.transaction(() => {
    net.record.logDepth = depth;
    truncate(s, net, depth, false);
    s.store.putNetwork(net.record);
  });
}

export function truncateLog(s: ControllerState, network: string, keep: number): void {
  const net = s.net(network);
  s.store.transaction(() => truncate(s, net, keep));
}
