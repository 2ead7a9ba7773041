// @meshp/core/host: the plugin host itself, for whoever assembles one (the CLI, an agent program,
// the testkit). A plugin is handed a `PluginHost` (the contract, in the root) and never needs these.
export { Host, NO_FIREWALL, chooseFirewall, type Hooks } from './host.js';
