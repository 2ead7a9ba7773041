/** Small helpers for container tests on a lab engine: a busybox web server and a probe of it. */
import type Docker from 'dockerode';
import type { ContainerSpec } from '@meshp/core';
import type { Netns } from './netns.js';
import { BUSYBOX_IMAGE } from './dockerd.js';

/** A command that serves `text` at / on port 80 with busybox httpd. */
export function serving(text: string): string[] {
  return ['sh', '-c', `mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p 80 -h /www`];
}

export function webSpec(name: string, hostPort: number, text: string, extra: Partial<ContainerSpec> = {}): ContainerSpec {
  return { name, image: BUSYBOX_IMAGE, command: serving(text), ports: [{ container: 80, host: hostPort, protocol: 'tcp' }], ...extra };
}

/** GET http://127.0.0.1:PORT/ from inside the namespace; the body, or null when nothing answers. (busybox 1.35 wget crashes on -T.) */
export async function probe(ns: Netns, port: number, attempts = 20): Promise<string | null> {
  for (let i = 0; i < attempts; i++) {
    try {
      const { stdout } = await ns.exec('busybox', ['wget', '-q', '-O-', `http://127.0.0.1:${port}/`]);
      return stdout.trim();
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return null;
}

/** What must be the same after a recreate: the inspect document without ids, timestamps and what the engine assigns (an endpoint's aliases by id and hostname). */
export function inspectSpec(d: Docker.ContainerInspectInfo) {
  const short = d.Id.slice(0, 12);
  return {
    name: d.Name,
    image: d.Image,
    config: { ...d.Config },
    host: { ...d.HostConfig, Mounts: undefined },
    mounts: d.Mounts.map((m) => ({ type: m.Type, name: m.Name, source: m.Source, destination: m.Destination, rw: m.RW })).sort(
      (a: { destination: string }, c: { destination: string }) => a.destination.localeCompare(c.destination),
    ),
    networks: Object.fromEntries(
      Object.entries(d.NetworkSettings.Networks).map(([n, e]) => [
        n,
        { aliases: (e.Aliases ?? []).filter((a: string) => a !== short && a !== d.Config.Hostname).sort(), ipam: e.IPAMConfig ?? null },
      ]),
    ),
  };
}
