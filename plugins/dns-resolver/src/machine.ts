/**
 * The machine's own resolver, told of the mesh's (record 0030): its manager detected from the root,
 * the mesh's entry set through the manager's per-link interface and taken away again
 * (integrate.ts), or, on a converged node whose `/etc/resolv.conf` is a plain file, that file managed
 * and its original put back (managed-file.ts); held otherwise, and said how or why not in one line.
 */
import type { Action, FileStore, HostStateStore, Plan, PluginHost, ResolverReport } from '@meshp/core';
import type { ResolverManagerSeen } from '@meshp/core/lifecycle';
import { oneLine } from '@meshp/core/util';
import { DEFAULT_COMMANDS, HELD_PREFIX, integratorFor, resolvconfEntry, type ManagerCommands, type MeshLink } from './integrate.js';
import { ORIGINAL_KEY, RESOLV_CONF_PATH, resolvConfAction, restoreOriginal, type Want } from './managed-file.js';
import { detectManager } from './manager.js';
import { localRunner, type Runner } from './run.js';

export interface MachineLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

export interface MachineOptions {
  /** The tunnel's interface: the link the manager is told of. Without one, nothing is integrated. */
  interface?: string;
  commands?: Partial<ManagerCommands>;
  runner?: Runner;
  log: MachineLog;
}

export type Integration = Pick<ResolverReport, 'integrated' | 'integration'>;

const MANAGED = `DNS integrated through ${RESOLV_CONF_PATH}, managed on this converged node (the mesh's resolver first; its original recorded, put back on the return to adopted)`;

export class MachineResolver {
  readonly #o: MachineOptions;
  #root = '/';
  #host: PluginHost | null = null;
  #manager: ResolverManagerSeen | null = null;
  #linked: { link: MeshLink; remove: () => Promise<string> } | null = null;
  #managed = false;
  #integration: Integration = { integrated: false, integration: HELD_PREFIX };

  constructor(o: MachineOptions) {
    this.#o = o;
  }

  bind(host: PluginHost, root: string): void {
    this.#host = host;
    this.#root = root;
  }

  get manager(): string {
    return this.#manager?.kind ?? '';
  }

  get integration(): Integration {
    return this.#integration;
  }

  /** What the leave would take away of the manager's, said before it is: null when nothing was set. */
  get entry(): string | null {
    return this.#linked ? `the per-link entry ${this.#integration.integration.replace(/^DNS integrated /, '')}` : null;
  }

  /** The manager told of the mesh's resolver, once per link, domain and search list; held where it has no per-link interface spoken here. */
  async integrate(address: string, port: number, domain: string, searchDomains: readonly string[]): Promise<void> {
    if (!this.#o.interface) {
      this.#integration = { integrated: false, integration: `${HELD_PREFIX} (no tunnel link to name)` };
      return;
    }
    const link: MeshLink = { interface: this.#o.interface, address, port, domain, searchDomains };
    if (this.#linked && JSON.stringify(this.#linked.link) === JSON.stringify(link)) return;
    if (!this.#linked) this.#manager = await detectManager(this.#root);
    const manager = this.#manager!;
    const it = integratorFor(manager, this.#o.runner ?? localRunner, { ...DEFAULT_COMMANDS, ...this.#o.commands });
    if ('held' in it) {
      if (!this.#managed) this.#integration = { integrated: false, integration: `${HELD_PREFIX} (${it.held})` };
      return;
    }
    try {
      const how = await it.set(link);
      this.#linked = { link, remove: () => it.remove(link) };
      this.#integration = { integrated: true, integration: `DNS integrated ${how}` };
      this.#o.log.info({ manager: manager.kind, how }, 'dns integrated');
    } catch (e) {
      const err = oneLine(e);
      if (this.#integration.integration !== `DNS not integrated: ${err}`) this.#o.log.warn({ manager: manager.kind, err }, 'dns not integrated');
      this.#integration = { integrated: false, integration: `DNS not integrated: ${err}` };
    }
  }

  /** The manager's entry taken away; what was removed (or why it could not be), null when none was set. */
  async unlink(): Promise<string | null> {
    const linked = this.#linked;
    if (!linked) return null;
    this.#linked = null;
    try {
      const what = await linked.remove();
      this.#integration = { integrated: false, integration: `${HELD_PREFIX} (the mesh's entry removed)` };
      return what;
    } catch (e) {
      this.#integration = { integrated: false, integration: `DNS not integrated: the mesh's entry not removed: ${oneLine(e)}` };
      this.#o.log.warn({ err: oneLine(e) }, 'dns entry not removed');
      return `not removed: ${oneLine(e)}`;
    }
  }

  /**
   * The entry an agent that did not stop (killed) may have left, taken away when the node leaves
   * without a resolver running (`meshp agent leave`): resolvconf's, by its name, which removing twice
   * does not mind. systemd-resolved's goes with the tunnel's link.
   */
  async forget(preview: boolean): Promise<string | null> {
    if (this.#linked || !this.#o.interface) return null;
    const m = await detectManager(this.#root);
    if (m.kind !== 'resolvconf' && m.kind !== 'openresolv') return null;
    const entry = resolvconfEntry(m.kind, this.#o.interface);
    if (preview) return `${m.kind}'s entry ${entry}, if one was left`;
    const cmd = { ...DEFAULT_COMMANDS, ...this.#o.commands };
    const r = await (this.#o.runner ?? localRunner)([...cmd.resolvconf, ...(m.kind === 'openresolv' ? ['-f'] : []), '-d', entry]).catch((e: unknown) => ({
      code: -1,
      stdout: '',
      stderr: oneLine(e),
    }));
    return r.code === 0 ? `${m.kind}'s entry ${entry}, if one was left` : `${m.kind}'s entry ${entry}: not removed: ${r.stderr.trim().split('\n')[0]}`;
  }

  /** The file action of the plan (managed-file.ts), when the host has a file store and a state. */
  async fileAction(plan: Plan, want: Want | null): Promise<Action | null> {
    const stores = await this.#stores();
    if (!stores) return null;
    const plain = (await detectManager(this.#root)).kind === 'file';
    return resolvConfAction(plan, stores.files, stores.store, plain, want, (managed) => {
      this.#managed = managed;
      this.#integration = managed
        ? { integrated: true, integration: MANAGED }
        : { integrated: false, integration: `${HELD_PREFIX} (${RESOLV_CONF_PATH} put back as found)` };
    });
  }

  /** A managed file put back when the node leaves (in a preview, said). */
  async restoreFile(preview: boolean): Promise<string | null> {
    const stores = await this.#stores();
    if (!stores || !(await stores.store.getValue(ORIGINAL_KEY))) return null;
    if (!preview) {
      await restoreOriginal(stores.files, stores.store);
      this.#managed = false;
    }
    return `${RESOLV_CONF_PATH}, put back byte for byte as it was found`;
  }

  async #stores(): Promise<{ files: FileStore; store: HostStateStore } | null> {
    const files = await this.#host?.files().catch(() => null);
    const store = await this.#host?.state().catch(() => null);
    return files && store ? { files, store } : null;
  }
}
