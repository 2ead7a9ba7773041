/**
 * Two modules of one node that claim one resource (a file, a container name, an opening, a host
 * port) would be refused by its agent on every reconcile. The controller refuses the change that
 * would make such a pair — an assign, or a module redefined under a node that has it — before
 * anything is stored, naming both modules and the resource.
 */
import { MeshpError } from '@meshp/core';
import { declarationFromWire, declarationFor, type MemberRecord, type ModuleDef } from '@meshp/core/delta';
import { describeClash, findClash } from '@meshp/core/schema';

/** Throws MESHP_MODULES_CLASH when the node's modules, as it would be sent them, claim one resource twice. */
export function checkNoClash(node: MemberRecord, moduleOf: (name: string) => ModuleDef | null): void {
  const clash = findClash(declarationFromWire(declarationFor(node, moduleOf)).modules);
  if (clash) throw new MeshpError('MESHP_MODULES_CLASH', `node ${node.id}: ${describeClash(clash)}; nothing was changed`);
}
