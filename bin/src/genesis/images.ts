/**
 * `meshp genesis --images FILE`: what runs in place of the catalogue's images, by container name.
 * The shipped catalogue names the real images (postgres, nats, registry, rabbitmq, nginx); a lab
 * with no registry in reach gives its local stand-ins instead:
 *
 *   { "meshp-store": { "image": "lab/busybox:1", "command": ["sh", "-c", "…"] }, … }
 *
 * A stand-in replaces the container's image, command, env and mounts (what it does not give is
 * dropped: the real image's env and volumes mean nothing to a stand-in); the container's name, ports
 * and restart stay the catalogue's, so every port and opening genesis raises is the shipped one.
 */
import { readFileSync } from 'node:fs';
import type { MeshpError } from '@meshp/core';
import { usage as usageError } from '@meshp/core/util';
import { checkManifest, type CatalogueModule } from '@meshp/core/catalogue';

export interface StandIn {
  image: string;
  command?: string[];
  env?: Record<string, string>;
  mounts?: { source: string; target: string; readOnly?: boolean }[];
}

const KEYS = new Set(['image', 'command', 'env', 'mounts']);

function usage(file: string, what: string): MeshpError {
  return usageError(`--images ${file}: ${what}`);
}

/** The file read and its shape checked; each container's fields are checked again with its manifest. */
export function readImages(file: string): Record<string, StandIn> {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw usage(file, `not a readable JSON file (${(e as Error).message})`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw usage(file, 'must be an object keyed by container name');
  const out: Record<string, StandIn> = {};
  for (const [name, v] of Object.entries(doc)) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw usage(file, `${name} must be an object with an image`);
    const extra = Object.keys(v).filter((k) => !KEYS.has(k));
    if (extra.length) throw usage(file, `${name} has ${extra.join(', ')}: a stand-in gives image, command, env and mounts only`);
    const s = v as Partial<StandIn>;
    if (typeof s.image !== 'string' || s.image === '') throw usage(file, `${name} has no image`);
    out[name] = s as StandIn;
  }
  return out;
}

type Container = { name: string; ports?: unknown; restart?: unknown } & Record<string, unknown>;

/** The catalogue with each named container's stand-in; a name no container of it has is refused. */
export function withImages(catalogue: CatalogueModule[], images: Record<string, StandIn>, file: string): CatalogueModule[] {
  const used = new Set<string>();
  const out = catalogue.map((m) => {
    if (!m.containers?.length) return m;
    const containers = (m.containers as Container[]).map((c) => {
      const s = images[c.name];
      if (!s) return c;
      used.add(c.name);
      return {
        name: c.name,
        ...s,
        ...(c.ports !== undefined ? { ports: c.ports } : {}),
        ...(c.restart !== undefined ? { restart: c.restart } : {}),
      };
    });
    return checkManifest({ ...m, containers }, `${m.name} with the stand-ins of ${file}`);
  });
  const unknown = Object.keys(images).filter((n) => !used.has(n));
  if (unknown.length) throw usage(file, `no container of the catalogue is named ${unknown.join(', ')}`);
  return out;
}
