/** A real host on a temporary root and state folder, with the real file and state plugins. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Declaration, ModuleDecl, Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { Reconciler } from '@meshp/core/reconcile';
import { LocalFilesPlugin } from '@meshp/files-local';
import { SqliteStatePlugin } from '@meshp/state-sqlite';
import type { Teardownable } from './netns.js';

export interface Bed {
  dir: string;
  root: string;
  stateDir: string;
  /** A fresh host on the same root and state: a new life of the node. */
  host(extra?: Plugin[]): Host;
  apply(decl: Declaration, options?: { preview?: boolean; extra?: Plugin[] }): ReturnType<Reconciler['reconcile']>;
}

export function bed(t: Teardownable, firewall = 'auto'): Bed {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const stateDir = join(dir, 'state');
  const hosts: Host[] = [];
  t.teardown(async () => {
    for (const h of hosts) await h.close();
  });
  const make = (extra: Plugin[] = []) => {
    const h = new Host({ root, stateDir, firewall }).use(new SqliteStatePlugin(), new LocalFilesPlugin(), ...extra);
    hosts.push(h);
    return h;
  };
  return {
    dir,
    root,
    stateDir,
    host: make,
    async apply(decl, options = {}) {
      const h = make(options.extra);
      try {
        return await new Reconciler(h).reconcile(decl, { preview: options.preview });
      } finally {
        await h.close();
      }
    },
  };
}

export function declaration(mode: Declaration['mode'], modules: ModuleDecl[], settings: Declaration['settings'] = { ports: {} }): Declaration {
  return { apiVersion: 'meshp/v1', node: 'n1', mode, settings, modules };
}

export function stateOf(result: { report: { resources: { key: string; state: string }[] } }, key: string): string | undefined {
  return result.report.resources.find((r) => r.key === key)?.state;
}
