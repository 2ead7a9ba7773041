/**
 * The plugin: on the host's `firewall` probe it reports what each iptables backend holds, with a
 * driver for `iptables-legacy` and `iptables-nft`. Rules a manager owns (firewalld, ufw, Shorewall,
 * CSF, pve-firewall; see managers.ts) are reported as that manager's kind with no driver, and the backend then
 * offers none either, unless a plugin that speaks the manager already answered for it.
 */
import { isMeshpError, PLUGIN_API_VERSION, STAGES, type FirewallProbe, type Plugin, type PluginHost } from '@meshp/core';
import { parseCidr } from './cidr.js';
import { IptablesDriver } from './driver.js';
import { inspectBackend } from './inspect.js';
import { managersInConfig, managersInRules, mergeManagers } from './managers.js';
import { findTable } from './save-format.js';
import { localRunner, type CommandRunner } from './runner.js';
import { BACKENDS, type Backend } from './tool.js';
import type { WatchOptions } from './watch.js';

export interface IptablesPluginOptions {
  /** Where commands run (default: this machine). Tests pass `nsenterRunner(netns)`. */
  runner?: CommandRunner;
  /** Backends to look at (default both). */
  backends?: Backend[];
  /** Refusals without `from` drop everything outside this range. */
  privateRange?: string;
  /** How `watch` reads: `intervalMs` (default 2000) and `debounceMs` (default 200). */
  watch?: WatchOptions;
}

export class IptablesPlugin implements Plugin {
  readonly name = 'firewall-iptables';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly runner: CommandRunner;
  readonly backends: Backend[];
  readonly privateRange?: string;
  readonly watchOptions?: WatchOptions;

  constructor(options: IptablesPluginOptions = {}) {
    this.runner = options.runner ?? localRunner();
    this.backends = options.backends ?? [...BACKENDS];
    for (const b of this.backends) if (!BACKENDS.includes(b)) throw new TypeError(`unknown iptables backend ${String(b)}`);
    if (options.privateRange) parseCidr(options.privateRange);
    this.privateRange = options.privateRange;
    this.watchOptions = options.watch;
  }

  driver(backend: Backend, root: string): IptablesDriver {
    return new IptablesDriver(backend, { runner: this.runner, root, privateRange: this.privateRange, watch: this.watchOptions });
  }

  apply(host: PluginHost): void {
    // A later stage than the default: a plugin that speaks ufw (stage 0) answers for ufw's chains first.
    host.hooks.firewall.tapPromise({ name: this.name, stage: STAGES.firewall.BASE }, async (probe) => this.probe(probe));
  }

  async probe(probe: FirewallProbe): Promise<void> {
    const config = await managersInConfig(probe.root, this.runner);
    const spoken = (kind: string) => probe.seen.some((s) => s.kind === kind && s.driver);
    const reported = new Set<string>();
    for (const backend of this.backends) {
      const kind = `iptables-${backend}`;
      let state;
      try {
        state = await inspectBackend(backend, this.runner);
      } catch (e) {
        if (!isMeshpError(e, 'MESHP_FIREWALL_TOOL_MISSING')) throw e;
        probe.seen.push({ kind, active: false, summary: `tools not installed: ${e.message}`, by: this.name });
        continue;
      }
      const filters = state.families.map((f) => findTable(f.ruleset, 'filter'));
      const managers = mergeManagers(managersInRules(filters), config);
      if (managers.length > 0) {
        // A manager's rules are its own: this kind offers no driver, so nothing is written into them.
        for (const m of managers) {
          if (reported.has(m.kind) || spoken(m.kind)) continue;
          reported.add(m.kind);
          probe.seen.push({
            kind: m.kind,
            active: true,
            summary: `${m.kind} manages the firewall (seen: ${m.seen} in ${kind}); firewall-iptables does not speak it`,
            by: this.name,
          });
        }
        const owners = managers.map((m) => m.kind).join(', ');
        // The ufw example plugin speaks ufw through this backend's driver, so ufw alone leaves it one.
        const driver = managers.every((m) => spoken(m.kind)) ? { driver: this.driver(backend, probe.root) } : {};
        if (state.present || probe.requested === kind)
          probe.seen.push({ kind, active: false, summary: `rules belong to ${owners}; ${state.summary}`, by: this.name, ...driver });
        continue;
      }
      if (!state.present && probe.requested !== kind) continue;
      probe.seen.push({ kind, active: state.active, summary: state.summary, by: this.name, driver: this.driver(backend, probe.root) });
    }
  }
}
