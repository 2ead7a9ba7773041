/**
 * Whose a chain of the filter table is: Docker's own chains, DOCKER-USER (where Docker says the
 * administrator's forward rules go, so the found firewall's), the mesh's derived filter's (MESHP-…),
 * or the found firewall's. Named here once for the planner, the reach walk, detection and retirement.
 */
import type { SavedTable } from './save-format.js';

export const DOCKER_USER = 'DOCKER-USER';
export const DERIVED_PREFIX = 'MESHP-';

export function hasChain(filter: SavedTable | undefined, name: string): boolean {
  return !!filter?.chains.some((c) => c.name === name);
}

/** Chains that belong to Docker or to the mesh's derived filter: never the found firewall's. */
export function isForeignChain(name: string): boolean {
  return name.startsWith('DOCKER') || name.startsWith(DERIVED_PREFIX);
}

/** Docker's own chains (not DOCKER-USER, where the found firewall's forward rules go). */
export function isDockerChain(name: string): boolean {
  return name.startsWith('DOCKER') && name !== DOCKER_USER;
}
