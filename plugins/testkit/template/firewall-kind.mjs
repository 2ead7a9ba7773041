/**
 * A firewall kind, as a plugin author starts one: copy this file, rename KIND, and replace each
 * driver method's body with your firewall's own commands. As shipped it is a working kind: "mykind"
 * is an nftables ruleset loaded from /etc/mykind.conf, recognised by that file and spoken through
 * the nftables plugin's driver, so `firewallConformance` (@meshp/testkit) passes on it from the start.
 *
 *   meshp host apply --plugin ./firewall-kind.mjs --firewall mykind --declaration d.json --state S
 *
 * The contract every method keeps is @meshp/core's FirewallDriver (its doc comments).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError, PLUGIN_API_VERSION } from '@meshp/core';
import { NftablesPlugin } from '@meshp/firewall-nftables';

/** What `--firewall KIND` asks for and what `meshp node list` shows. */
const KIND = 'mykind';
/** Where the found firewall of this kind loads from, inside the host's root. */
const CONFIG = '/etc/mykind.conf';

export default class MyKindPlugin {
  name = 'firewall-mykind';
  apiVersion = PLUGIN_API_VERSION;

  /** Options are checked here, when the plugin is made: a bad one is refused before anything runs. */
  constructor(options = {}) {
    if (options.privateRange !== undefined && typeof options.privateRange !== 'string') {
      throw new MeshpError('MESHP_PLUGIN_INVALID', 'firewall-mykind: privateRange must be a CIDR string');
    }
    this.nft = new NftablesPlugin({ ...options, configFile: CONFIG });
  }

  apply(host) {
    // Detect: record what you see. An active firewall of your kind comes with a driver; one you see
    // but cannot speak comes without (the host then refuses, naming it). Never guess.
    host.hooks.firewall.tapPromise(this.name, async (probe) => {
      if (!existsSync(join(probe.root, CONFIG))) return;
      const inner = this.nft.driver(probe.root);
      const described = await inner.describe();
      probe.seen.push({ kind: KIND, active: described.active, summary: `${KIND} (${CONFIG})`, by: this.name, driver: driverOf(inner) });
    });
  }
}

/** The driver: each method keeps the FirewallDriver contract; here each hands over to nftables. */
function driverOf(inner) {
  return {
    kind: KIND,
    async describe() {
      return { ...(await inner.describe()), kind: KIND, manager: KIND, configFile: CONFIG };
    },
    /** The openings present that carry the mesh's mark (comment "meshp:ID"). */
    openings: () => inner.openings(),
    /** One transaction: add what is missing, remove what is marked and unwanted, never an unmarked rule. */
    ensure: (openings, refusals) => inner.ensure(openings, refusals),
    loadDerived: (filter) => inner.loadDerived(filter),
    unloadDerived: () => inner.unloadDerived(),
    /** Disable without flushing; the configuration stays on disk. */
    retire: () => inner.retire(),
    reenable: (state) => inner.reenable(state),
    /** Where each door is reachable from now: what the converge preview and the opening check read. */
    reachability: (doors) => inner.reachability(doors),
  };
}
