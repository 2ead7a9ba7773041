export { checkBounds, DEFAULT_BOUNDS, type Bounds } from './bounds.js';
export { checkInput } from './check.js';
export {
  declarationSchema,
  moduleDeclSchema,
  moduleDefSchema,
  settingsSchema,
  catalogueManifestSchema,
  catalogueFileSchema,
  policyRuleSchema,
  policyFileSchema,
} from './declaration.js';
export { checkModuleDefs, checkPolicy, readCatalogueFile, readPolicyFile, type PolicyRuleInput } from './inputs.js';
export { jsonSchemaFiles } from './json-schema.js';
export { describeClash, findClash, type Clash } from './clash.js';
export { dnsFileSchema, readDnsFile, dnsToFile, checkDns, parseNameserver, type DnsFile } from './dns.js';
