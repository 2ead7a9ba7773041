/** Small helpers for container tests on a lab engine: a busybox web server and a probe of it. */
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
