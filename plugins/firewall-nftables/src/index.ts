export { NftablesPlugin, type NftablesPluginOptions } from './plugin.js';
export { NftablesDriver, openingsOf, type NftablesDriverOptions, type NftablesRetired } from './driver.js';
export { Nft, runTool } from './nft.js';
export { localRunner, localSpawner, netnsPrefix, type RunResult, type Runner, type Spawner } from './runner.js';
export { parseRuleset, type Batch, type Command, type Expr, type Family, type NftChain, type NftRule, type NftTable, type Ruleset } from './schema.js';
export { classifyTable, MARK, MESH_TABLE, DERIVED_TABLE, type TableOwner } from './classify.js';
export { canonical, parseCidr, splitFamilies } from './cidr.js';
export { planEnsure } from './plan.js';
export { shapesFor, buildRule, parseShape, type Shape } from './shape.js';
