/** The engine's list entries and inspect documents, read into the contract's ContainerInfo. */
import type Docker from 'dockerode';
import type { ContainerInfo, Protocol, PublishedPort } from '@meshp/core';

function byCodePoint(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function protocolOf(type: string): Protocol | null {
  return type === 'tcp' || type === 'udp' ? type : null;
}

/** Stable order, no duplicates: the same container reads the same from list and inspect. */
export function sortPorts(ports: PublishedPort[]): PublishedPort[] {
  const seen = new Set<string>();
  const out: PublishedPort[] = [];
  for (const p of ports) {
    const key = `${p.hostIp}|${p.hostPort}|${p.protocol}|${p.containerPort}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(p);
  }
  return out.sort(
    (a, b) => a.hostPort - b.hostPort || byCodePoint(a.protocol, b.protocol) || byCodePoint(a.hostIp, b.hostIp) || a.containerPort - b.containerPort,
  );
}

/** A container's own name: the one without a second slash (others are legacy link aliases). */
export function nameOf(names: string[] | undefined): string {
  const own = names?.find((n) => n.lastIndexOf('/') === 0) ?? names?.[0] ?? '';
  return own.replace(/^\//, '');
}

export function portsFromList(container: string, ports: Docker.Port[] | undefined): PublishedPort[] {
  const out: PublishedPort[] = [];
  for (const p of ports ?? []) {
    const protocol = protocolOf(p.Type);
    if (!protocol || !p.PublicPort) continue;
    out.push({ container, containerPort: p.PrivatePort, hostPort: p.PublicPort, hostIp: p.IP ?? '', protocol });
  }
  return sortPorts(out);
}

type PortMap = Record<string, Array<{ HostIp?: string; HostPort?: string }> | null | undefined>;

export function portsFromInspect(container: string, ports: PortMap | undefined | null): PublishedPort[] {
  const out: PublishedPort[] = [];
  for (const [key, bindings] of Object.entries(ports ?? {})) {
    const [port, type] = key.split('/');
    const protocol = protocolOf(type ?? 'tcp');
    if (!protocol || !bindings) continue;
    for (const b of bindings) {
      const hostPort = Number(b.HostPort);
      if (!Number.isInteger(hostPort) || hostPort <= 0) continue;
      out.push({ container, containerPort: Number(port), hostPort, hostIp: b.HostIp ?? '', protocol });
    }
  }
  return sortPorts(out);
}

/** From a list entry; `image` is the reference the container was created with. */
export function infoFromList(entry: Docker.ContainerInfo, image: string): ContainerInfo {
  const name = nameOf(entry.Names);
  return {
    name,
    id: entry.Id,
    image,
    state: entry.State,
    labels: { ...(entry.Labels ?? {}) },
    ports: portsFromList(name, entry.Ports),
  };
}

export function infoFromInspect(doc: Docker.ContainerInspectInfo): ContainerInfo {
  const name = doc.Name.replace(/^\//, '');
  return {
    name,
    id: doc.Id,
    image: doc.Config.Image,
    state: doc.State.Status,
    labels: { ...(doc.Config.Labels ?? {}) },
    ports: portsFromInspect(name, doc.NetworkSettings?.Ports as PortMap | undefined),
  };
}

/**
 * A list entry shows the image's id instead of its reference when the tag has since moved
 * to another image; only then does list() read the reference from the inspect document.
 */
export function listShowsImageId(entry: Docker.ContainerInfo): boolean {
  return entry.Image === entry.ImageID || /^sha256:[0-9a-f]{64}$/.test(entry.Image);
}
