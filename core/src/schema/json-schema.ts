/** JSON Schema for editors (schemas/ at the repository's top), made from the one schema definition. */
import { z } from 'zod';
import { dnsFileSchema } from './dns.js';
import { catalogueFileSchema, catalogueManifestSchema, declarationSchema, policyFileSchema } from './declaration.js';

const BASE = 'https://meshp.dev/schemas/';

/** File name → JSON Schema document. */
export function jsonSchemaFiles(): Record<string, unknown> {
  const doc = (file: string, title: string, s: z.ZodType) =>
    [file, { ...z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }), $id: `${BASE}${file}`, title }] as const;
  return Object.fromEntries([
    doc('declaration.schema.json', 'meshp declaration (host apply --declaration)', declarationSchema),
    doc('catalogue-module.schema.json', 'meshp catalogue module manifest (examples/catalogue, genesis)', catalogueManifestSchema),
    doc('catalogue-file.schema.json', 'meshp catalogue add FILE', catalogueFileSchema),
    doc('policy.schema.json', 'meshp policy set FILE', policyFileSchema),
    doc('dns.schema.json', 'meshp dns set FILE', dnsFileSchema),
  ]);
}
