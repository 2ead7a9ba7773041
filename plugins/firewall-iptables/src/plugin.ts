/**
 * The plugin: on the host's `firewall` probe it reports what each iptables backend holds, with a
 * driver for `iptables-legacy` and `iptables-nft`. Rules that are ufw's are reported as kind `ufw`
 * with no driver, unless a plugin that speaks ufw already answered for them.
 */
import { isMeshpError, PLUGIN_API_VERSION, STAGE, type FirewallProbe, type Host, type Plugin } from '@meshp/core';
import { parseCidr } from './cidr.js';
import { IptablesDriver } from './driver.js';
import { inspectBackend } from './inspect.js';
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

  apply(host: Host): void {
    // A later stage than the default: a plugin that speaks ufw (stage 0) answers for ufw's chains first.
    host.hooks.firewall.tapPromise({ name: this.name, stage: STAGE.CHECKS }, async (probe) => this.probe(probe));
  }

  async probe(probe: FirewallProbe): Promise<void> {
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
      if (state.ufw) {
        if (!probe.seen.some((s) => s.kind === 'ufw' && s.driver)) {
          probe.seen.push({ kind: 'ufw', active: state.active, summary: `ufw chains in ${kind}: ${state.summary}`, by: this.name });
        }
        // The rules are ufw's: this kind is not active in its own right.
        probe.seen.push({ kind, active: false, summary: `rules belong to ufw; ${state.summary}`, by: this.name, driver: this.driver(backend, probe.root) });
        continue;
      }
      if (!state.present && probe.requested !== kind) continue;
      probe.seen.push({ kind, active: state.active, summary: state.summary, by: this.name, driver: this.driver(backend, probe.root) });
    }
  }
}
