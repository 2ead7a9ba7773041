/**
 * `meshp agent --advertise-route PREFIX` (issue 26): the prefixes this node offers to route, in every
 * report. They serve nothing until an admin approves them (`meshp route approve NODE --group NAME`).
 */
import type { AgentMessage, ControlLink } from '@meshp/core';

export function withAdvertisedRoutes(link: ControlLink, advertisedRoutes: readonly string[]): ControlLink {
  if (!advertisedRoutes.length) return link;
  return {
    enrol: (input) => link.enrol(input),
    sync: () => {
      const ch = link.sync();
      return {
        send: (m: AgentMessage) => ch.send('report' in m ? { report: { ...m.report, advertisedRoutes: [...advertisedRoutes] } } : m),
        onMessage: (l) => ch.onMessage(l),
        onClose: (l) => ch.onClose(l),
        close: (e) => ch.close(e),
      };
    },
    close: () => link.close(),
  };
}

/** `meshp agent --exit-node NAME` (ADR 0039): the exit node this node asks to use, in every Hello ('' none). */
export function withExitNode(link: ControlLink, exitNode: string): ControlLink {
  if (!exitNode) return link;
  return {
    enrol: (input) => link.enrol(input),
    sync: () => {
      const ch = link.sync();
      return {
        send: (m: AgentMessage) => ch.send('hello' in m ? { hello: { ...m.hello, exitNode } } : m),
        onMessage: (l) => ch.onMessage(l),
        onClose: (l) => ch.onClose(l),
        close: (e) => ch.close(e),
      };
    },
    close: () => link.close(),
  };
}
