/** Adds the `ufw` kind: it answers the host's firewall probe when ufw is enabled. */
import { isMeshpError, PLUGIN_API_VERSION, STAGES, type Plugin, type PluginHost } from '@meshp/core';
import { localRunner, type CommandRunner } from '@meshp/firewall-iptables';
import { UfwDriver } from './driver.js';

export interface UfwPluginOptions {
  runner?: CommandRunner;
  privateRange?: string;
}

export class UfwPlugin implements Plugin {
  readonly name = 'firewall-ufw';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly runner: CommandRunner;

  constructor(readonly options: UfwPluginOptions = {}) {
    this.runner = options.runner ?? localRunner();
  }

  apply(host: PluginHost): void {
    // STAGES.firewall.LAYERED runs before the iptables plugin (STAGES.firewall.BASE), which then leaves ufw's chains to us.
    host.hooks.firewall.tapPromise({ name: this.name, stage: STAGES.firewall.LAYERED }, async (probe) => {
      const driver = new UfwDriver({ runner: this.runner, root: probe.root, privateRange: this.options.privateRange });
      let active: boolean;
      try {
        active = await driver.active();
      } catch (e) {
        if (isMeshpError(e, 'MESHP_FIREWALL_TOOL_MISSING')) return;
        throw e;
      }
      if (!active && probe.requested !== 'ufw') return;
      probe.seen.push({ kind: 'ufw', active, summary: `ufw ${active ? 'active' : 'inactive'}`, by: this.name, driver });
    });
  }
}
