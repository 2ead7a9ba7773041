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
  policyTestSchema,
  MAX_POLICY_TESTS,
} from './declaration.js';
export {
  checkModuleDefs,
  checkPolicy,
  checkPolicyTests,
  readCatalogueFile,
  readPolicyDocument,
  readPolicyFile,
  type PolicyRuleInput,
  type PolicyTestInput,
} from './inputs.js';
export { jsonSchemaFiles } from './json-schema.js';
export { describeClash, findClash, type Clash } from './clash.js';
export { dnsFileSchema, readDnsFile, dnsToFile, checkDns, parseNameserver, type DnsFile } from './dns.js';
export { checkAdvertisedRoutes, checkRouteGroup, EXIT_PREFIXES, isExitGroup, routeGroupSchema, ROUTE_LIMITS, ROUTE_TAG_PREFIX } from './routes.js';
