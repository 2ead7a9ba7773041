import { access } from 'node:fs/promises';
import { MeshpError, PLUGIN_API_VERSION, STAGES, isMeshpError, type Plugin, type PluginHost } from '@meshp/core';
import { parseCidr } from './cidr.js';
import { classifyTable, foundActive, tablesOwnedBy } from './classify.js';
import { NftablesDriver } from './driver.js';
import { managersInConfig, type ManagerSeen } from './managers.js';
import { libnftRunner, type NftEngine } from './libnft.js';
import { localRunner, localSpawner, netnsPrefix, type Runner, type Spawner } from './runner.js';
import { tableKey, type Ruleset } from './schema.js';

export interface NftablesPluginOptions {
  /** Runs `nft` (and `unshare`, `systemctl`); default: this machine, or the namespace below. */
  exec?: Runner;
  /** Starts `nft monitor`; default as `exec`. */
  spawn?: Spawner;
  /** Speak to the ruleset of this named network namespace (/var/run/netns/NAME). */
  netns?: string;
  /** The found firewall's config file, inside the host's root. Default /etc/nftables.conf. */
  configFile?: string;
  /** The nft binary. Default "nft". */
  bin?: string;
  /** The private network (CIDR): refusals without `from` drop everything outside it. */
  privateRange?: string;
  /** A systemd unit disabled on retire and enabled on re-enable (never stopped). Default: none touched. */
  service?: string;
  /**
   * How nft is spoken. Default `libnftables`: the library nft is built on, in a thread of the agent
   * entered into the namespace (no process per command), falling back to `process` where it cannot
   * be loaded. `process`: one `nft` process per command, always (so too with `exec` or `bin`).
   */
  engine?: NftEngine;
}

export class NftablesPlugin implements Plugin {
  readonly name = 'firewall-nftables';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly #runner: Runner;
  readonly #spawner: Spawner;
  readonly #nftRunner: Runner;
  readonly #options: NftablesPluginOptions;

  constructor(options: NftablesPluginOptions = {}) {
    if (options.netns !== undefined && !/^[\w.-]+$/.test(options.netns)) {
      throw new MeshpError('MESHP_PLUGIN_INVALID', `firewall-nftables: netns ${JSON.stringify(options.netns)} is not a namespace name`);
    }
    if (options.configFile !== undefined && !options.configFile.startsWith('/')) {
      throw new MeshpError('MESHP_PLUGIN_INVALID', 'firewall-nftables: configFile must be an absolute path (inside the root)');
    }
    if (options.privateRange !== undefined) parseCidr(options.privateRange);
    const prefix = options.netns ? netnsPrefix(options.netns) : [];
    this.#runner = options.exec ?? localRunner(prefix);
    this.#spawner = options.spawn ?? localSpawner(prefix);
    const bin = options.bin ?? 'nft';
    this.#nftRunner = options.engine === 'process' || options.exec || options.bin ? this.#runner : libnftRunner(bin, this.#runner, options.netns);
    this.#options = options;
  }

  driver(root: string): NftablesDriver {
    return new NftablesDriver({
      runner: this.#runner,
      nftRunner: this.#nftRunner,
      spawner: this.#spawner,
      root,
      configFile: this.#options.configFile ?? '/etc/nftables.conf',
      bin: this.#options.bin,
      service: this.#options.service,
      privateRange: this.#options.privateRange,
    });
  }

  apply(host: PluginHost): void {
    // After the plugins that speak a manager (stage RESOURCES, like the ufw example) have answered.
    host.hooks.firewall.tapPromise({ name: this.name, stage: STAGES.firewall.BASE }, async (probe) => {
      const driver = this.driver(probe.root);
      let rs: Ruleset;
      try {
        rs = await driver.nft.list();
      } catch (e) {
        if (!isMeshpError(e, 'MESHP_FIREWALL_TOOL_MISSING')) throw e;
        probe.seen.push({ kind: 'nftables', active: false, summary: 'nft is not installed', by: this.name });
        return;
      }
      const firewalld = rs.tables.filter((t) => classifyTable(t, rs) === 'firewalld');
      let managers: (ManagerSeen & { owns?: boolean })[] = await managersInConfig(probe.root, this.#runner);
      if (firewalld.length > 0) {
        const table = `nftables table${firewalld.length > 1 ? 's' : ''} ${firewalld.map((t) => tableKey(t)).join(', ')}`;
        const config = managers.find((m) => m.kind === 'firewalld');
        managers = [{ kind: 'firewalld', seen: config ? `${table}; ${config.seen}` : table, owns: true }, ...managers.filter((m) => m !== config)];
      }
      const spoken = (kind: string) => probe.seen.some((s) => s.kind === kind && s.driver);
      for (const m of managers) {
        if (probe.seen.some((s) => s.kind === m.kind)) continue;
        const summary = m.owns ? `firewalld owns ${m.seen}` : `${m.kind} manages the firewall (seen: ${m.seen}); firewall-nftables does not speak it`;
        probe.seen.push({ kind: m.kind, active: true, summary, by: this.name });
      }
      // A manager's ruleset is its own: no driver is offered beside it (its reload would drop our rules,
      // and its own table, not walked here, may drop what ours lets through).
      const managed = managers.filter((m) => !spoken(m.kind));
      const found = tablesOwnedBy(rs, 'found');
      const hasConfig = await access(driver.configPath).then(
        () => true,
        () => false,
      );
      if (found.length === 0 && !hasConfig && probe.requested !== 'nftables') return;
      const active = foundActive(rs);
      const tables = found.length > 0 ? `tables ${found.map((t) => tableKey(t)).join(', ')}` : 'no tables';
      const summary = `${tables}${active ? ', dropping' : ', nothing dropped'}${hasConfig ? `; config ${driver.configPath}` : ''}`;
      if (managed.length > 0) {
        probe.seen.push({ kind: 'nftables', active: false, summary: `managed by ${managed.map((m) => m.kind).join(', ')}; ${summary}`, by: this.name });
        return;
      }
      probe.seen.push({ kind: 'nftables', active, summary, by: this.name, driver });
    });
  }
}
