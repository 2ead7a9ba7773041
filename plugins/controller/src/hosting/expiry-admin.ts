/**
 * Node credentials that expire, and a node's WireGuard key rotated (issue 28, docs/adr/0041):
 * `meshp node expire|renew|rekey` and the network's node lifetime. An expiry or a renewal is one
 * change of the member (one version, so each peer drops the node, or gets it back, in one delta);
 * a rekey is asked of the node's agent on its open stream, which makes the key and reports it: the
 * key change is then a normal change (session.ts), its peers get it in one delta. Each previews.
 */
import { MeshpError, type AdminMethods } from '@meshp/core';
import { notFound, usage } from '@meshp/core/util';
import type { AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';

type Method = 'expireNode' | 'renewNode' | 'getNodeLifetime' | 'setNodeLifetime' | 'rekeyNode';
type WireNode = NonNullable<ReturnType<AdminMethods<AdminApi>['showNode']>['node']>;

export interface ExpiryDeps {
  controller: Controller;
  /** The node's status as the admin API sends it. */
  node(network: string, id: string): WireNode;
  /** Called after a change to the network (its fan-out). */
  changed(network: string): void;
  /** The node's expiry moved: the clock that records expiries looks again (expiry-clock.ts). */
  expiryMoved(expiresAt?: string): void;
  /** Asks the node's agent, on its open stream, for a new tunnel key; false: no stream open here. */
  rekey(network: string, node: string, id: string): boolean;
}

/** The peers that have the node in their view now (its own view's peers: scope is both ways), not expired. */
function peersOf(controller: Controller, net: string, id: string): string[] {
  return controller
    .snapshotOf(net, id)
    .delta.upsertPeers.map((p) => p.id)
    .filter((p) => !controller.member(net, p)?.expiredAt)
    .sort();
}

function memberOf(controller: Controller, net: string, id: string) {
  if (!id) throw usage('node is required');
  const m = controller.member(net, id);
  if (!m) throw notFound('node', id, net);
  return m;
}

let rekeys = 0;

export function expiryMethods(d: ExpiryDeps): Pick<AdminMethods<AdminApi>, Method> {
  const { controller } = d;
  return {
    expireNode: (r, net) => {
      const m = memberOf(controller, net, r.node);
      const peers = peersOf(controller, net, m.id);
      const unchanged = !!m.expiredAt;
      if (r.preview) return { node: d.node(net, m.id), stateVersion: controller.stateVersion(net), peers, unchanged };
      const stateVersion = controller.expireNode(net, m.id);
      if (!unchanged) {
        d.changed(net);
        d.expiryMoved();
      }
      return { node: d.node(net, m.id), stateVersion, peers, unchanged };
    },
    renewNode: (r, net) => {
      const m = memberOf(controller, net, r.node);
      const seconds = r.seconds ? Number(r.seconds) : undefined;
      // Its peers get it back only if it was expired: they are the peers its view has (scope is both ways).
      const peers = m.expiredAt ? peersOf(controller, net, m.id) : [];
      if (r.preview) {
        const term = seconds ?? controller.nodeLifetime(net).seconds;
        return { node: d.node(net, m.id), stateVersion: controller.stateVersion(net), expiresAt: new Date(Date.now() + term * 1000).toISOString(), peers };
      }
      const stateVersion = controller.renewNode(net, m.id, seconds);
      d.changed(net);
      d.expiryMoved(controller.member(net, m.id)?.expiresAt ?? undefined);
      return { node: d.node(net, m.id), stateVersion, expiresAt: controller.member(net, m.id)?.expiresAt ?? '', peers };
    },
    getNodeLifetime: (_r, net) => {
      const l = controller.nodeLifetime(net);
      return { seconds: l.seconds, default: l.isDefault };
    },
    setNodeLifetime: (r, net) => {
      const before = controller.setNodeLifetime(net, Number(r.seconds));
      return { seconds: controller.nodeLifetime(net).seconds, secondsBefore: before };
    },
    rekeyNode: (r, net) => {
      const m = memberOf(controller, net, r.node);
      if (!m.tunnelKey) throw usage(`${m.id} runs no tunnel (it enrolled no WireGuard key): there is no tunnel key to rotate`);
      if (m.expiredAt) throw usage(`${m.id} is expired: renew it first (meshp node renew ${m.id}), its agent is refused its stream until then`);
      const peers = peersOf(controller, net, m.id);
      if (r.preview) return { node: d.node(net, m.id), tunnelKey: m.tunnelKey, peers, asked: false };
      const id = `rekey-${Date.now().toString(36)}-${++rekeys}`;
      if (!d.rekey(net, m.id, id))
        throw new MeshpError(
          'MESHP_NODE_OFFLINE',
          `${m.id} is not connected to this controller: its agent makes the new key, so it must be on its stream (nothing was changed)`,
        );
      return { node: d.node(net, m.id), tunnelKey: m.tunnelKey, peers, asked: true };
    },
  };
}
