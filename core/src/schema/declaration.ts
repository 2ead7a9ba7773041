/**
 * One schema per input: a declaration (host apply files and what a controller sends), a module of
 * the catalogue (`catalogue add`, genesis manifests) and a policy. Objects are strict: a key the
 * schema does not know ("rulez", "file") is refused, not ignored.
 */
import { z } from 'zod';
import { containerName, fileMode, name, path, port, portOrPlaceholder, protocol, range, rangeOrPlaceholder, trafficPath } from './fields.js';

function moduleParts<P extends z.ZodType, R extends z.ZodType>(p: P, r: R) {
  const file = z.strictObject({ path, content: z.string(), mode: fileMode.optional(), createOnce: z.boolean().optional() });
  const container = z.strictObject({
    name: containerName,
    image: z.string().min(1).max(512),
    command: z.array(z.string()).max(256).optional(),
    env: z.record(z.string().max(256), z.string()).optional(),
    ports: z
      .array(z.strictObject({ container: p, host: p, protocol: protocol.optional() }))
      .max(256)
      .optional(),
    mounts: z
      .array(z.strictObject({ source: path, target: path, readOnly: z.boolean().optional() }))
      .max(256)
      .optional(),
    restart: z.enum(['no', 'always', 'unless-stopped', 'on-failure']).optional(),
  });
  const opening = z.strictObject({ id: name.optional(), port: p, protocol: protocol.optional(), from: z.array(r).max(1024).optional(), path: trafficPath });
  return { files: z.array(file).max(1024).optional(), containers: z.array(container).max(256).optional(), openings: z.array(opening).max(1024).optional() };
}

const concrete = moduleParts(port, range);
/** The catalogue's modules may open to "{{privateRange}}", filled per node (ports stay numbers: the wire carries numbers). */
const defined = moduleParts(port, rangeOrPlaceholder);
const template = moduleParts(portOrPlaceholder, rangeOrPlaceholder);

/** A module as a node is sent it: `taken` says whether its cutover happened there. */
export const moduleDeclSchema = z.strictObject({ name, taken: z.boolean(), ...concrete });

/** A module as the catalogue defines it (`catalogue add`): what it declares, for every node. */
export const moduleDefSchema = z.strictObject({ name, ...defined });

export const settingsSchema = z.strictObject({ ports: z.record(z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/), port), privateRange: range.optional() });

export const declarationSchema = z.strictObject({
  $schema: z.string().optional(),
  apiVersion: z.literal('meshp/v1', { error: 'must be "meshp/v1"' }),
  node: name,
  mode: z.enum(['adopted', 'converged'], { error: 'must be "adopted" or "converged"' }),
  settings: settingsSchema.optional(),
  modules: z.array(moduleDeclSchema).max(1024),
});

/** A catalogue manifest (examples/catalogue, genesis): ports and ranges may name a node's settings. */
export const catalogueManifestSchema = z.strictObject({
  $schema: z.string().optional(),
  apiVersion: z.literal('meshp/v1'),
  kind: z.literal('Module'),
  name,
  foundation: z.boolean().optional(),
  defaults: z.strictObject({ ports: z.record(z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/), port).optional() }).optional(),
  ...template,
});

/** What `catalogue add` reads: one module, a list, or { "modules": [...] }. */
export const catalogueFileSchema = z.union([
  moduleDefSchema,
  z.array(moduleDefSchema).min(1).max(1024),
  z.strictObject({ $schema: z.string().optional(), modules: z.array(moduleDefSchema).min(1).max(1024) }),
]);

/** "80", "8000-8100", "443/tcp" (or a number): ports 1..65535, a range low to high. */
const policyPort = z.union([
  port,
  z
    .string()
    .regex(/^\d{1,5}(-\d{1,5})?(\/(tcp|udp))?$/, 'must be a port like "80", "8000-8100" or "443/tcp"')
    .refine((s) => {
      const [lo, hi = lo] = s.split('/')[0]!.split('-').map(Number) as [number, number?];
      return lo >= 1 && hi! <= 65535 && lo <= hi!;
    }, 'must name ports 1..65535, low to high'),
]);

/** A rule's destination: a tag, or `route:NAME` for the prefixes of a route group (issue 26). */
const policyDestination = z.union([name, z.string().regex(/^route:[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, 'must be a tag, or route:NAME for a route group')]);

export const policyRuleSchema = z.strictObject({ from: name, to: policyDestination, ports: z.array(policyPort).max(256).optional() });

/** A policy test's end: a node's name, or `tag:NAME` for the holders of a tag. */
const testEnd = z.string().regex(/^(tag:)?[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, 'must be a node name or tag:NAME');

/** One port and its protocol (tcp when not said): "80", "80/tcp", "53/udp", or a number. */
const testPort = z.union([port, z.string().regex(/^([1-9]\d{0,4})(\/(tcp|udp))?$/, 'must be one port like "80", "443/tcp" or "53/udp"')]).refine((p) => {
  const n = typeof p === 'number' ? p : Number(p.split('/')[0]);
  return n >= 1 && n <= 65535;
}, 'must name a port 1..65535');

/** `tests` of a policy file: what must be accepted or denied, run by the controller on every `policy set` (issue 28). */
export const policyTestSchema = z.strictObject({ from: testEnd, to: testEnd, port: testPort, expect: z.enum(['accept', 'deny']) });

/** At most this many tests in a policy file: each is a few lookups in the policy's index. */
export const MAX_POLICY_TESTS = 1_000;

/** `policy set`: { "rules": [...], "tests": [...] } (a bare list is read as the rules too). */
export const policyFileSchema = z.union([
  z.strictObject({
    $schema: z.string().optional(),
    rules: z.array(policyRuleSchema).max(10_000),
    tests: z.array(policyTestSchema).max(MAX_POLICY_TESTS).optional(),
  }),
  z.array(policyRuleSchema).max(10_000),
]);
