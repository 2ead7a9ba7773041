/**
 * One handler per resource kind that has content on the machine, built on the plugin contracts.
 * The reconciler is written against this shape only, so a kind is added here and nowhere else.
 */
import { createHash } from 'node:crypto';
import { LABEL_SPEC_HASH, type ContainerRuntime, type FileStore, type OriginalMeta } from '../contract/providers.js';
import type { MeshpError } from '../errors.js';
import { providerMissing } from '../conditions.js';
import type { ContainerSpec, FileSpec, ResourceKind } from '../contract/model.js';

export interface Observation {
  /** What is there, in the same terms as `desiredDigest`: equal means converged. */
  digest: string;
  /** Identity of what is there, for noticing a change by something else while held. */
  fingerprint: string;
  /** The bytes kept as the original when the resource is found. */
  original(): Promise<Uint8Array>;
  /** Which file it is ("device:inode"), whatever path reached it; files only. */
  identity?: string;
  /** What is kept with the original besides its bytes (a file's mode and owner). */
  meta?: OriginalMeta;
  /** Keeps what the original needs to be put back (a container's image), once the original is recorded. */
  keep?(): Promise<void>;
}

export interface WriteContext {
  node: string;
  module: string;
  digest: string;
  /** What the plan saw there: an identity, null for absent; a target that is no longer it is refused. */
  expect?: string | null;
}

export interface ResourceHandler<S> {
  readonly kind: ResourceKind;
  id(spec: S): string;
  desiredDigest(spec: S): string;
  observe(id: string): Promise<Observation | null>;
  /** Answers the identity of what was written, when the kind has one. */
  write(spec: S, ctx: WriteContext): Promise<string | void>;
  remove(id: string, expect?: string | null): Promise<void>;
  /** A declared resource that may not be rewritten once present (create-once files). */
  createOnly?(spec: S): boolean;
}

export type ContentKind = Exclude<ResourceKind, 'opening'>;
export interface SpecOf {
  file: FileSpec;
  container: ContainerSpec;
}
export type Handlers = { [K in ContentKind]: ResourceHandler<SpecOf[K]> | null };

export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export function parseMode(mode: string | undefined): number {
  return mode === undefined ? 0o644 : parseInt(mode, 8);
}

function fileDigest(bytes: Uint8Array | string, mode: number): string {
  return `${sha256(bytes)}:${(mode & 0o7777).toString(8).padStart(4, '0')}`;
}

export function fileHandler(files: FileStore): ResourceHandler<FileSpec> {
  return {
    kind: 'file',
    id: (spec) => spec.path,
    desiredDigest: (spec) => fileDigest(spec.content, parseMode(spec.mode)),
    async observe(path) {
      const stat = await files.read(path);
      if (!stat) return null;
      const digest = fileDigest(stat.bytes, stat.mode);
      const meta: OriginalMeta = {
        mode: stat.mode & 0o7777,
        ...(stat.uid === undefined ? {} : { uid: stat.uid }),
        ...(stat.gid === undefined ? {} : { gid: stat.gid }),
      };
      return { digest, fingerprint: digest, original: async () => stat.bytes, meta, ...(stat.identity ? { identity: stat.identity } : {}) };
    },
    async write(spec, ctx) {
      const options = ctx.expect === undefined ? {} : { expect: ctx.expect };
      return files.write(spec.path, new TextEncoder().encode(spec.content), parseMode(spec.mode), options);
    },
    remove: (path, expect) => files.remove(path, expect === undefined || expect === null ? {} : { expect }),
    createOnly: (spec) => spec.createOnce === true,
  };
}

/** Canonical JSON: keys sorted, so equal specs hash equal whatever order they were written in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function containerSpecHash(spec: ContainerSpec): string {
  return sha256(canonicalJson(spec)).slice(0, 32);
}

export function containerHandler(runtime: ContainerRuntime): ResourceHandler<ContainerSpec> {
  return {
    kind: 'container',
    id: (spec) => spec.name,
    desiredDigest: containerSpecHash,
    async observe(name) {
      const found = await runtime.inspect(name);
      if (!found) return null;
      const { info, document } = found;
      // A stopped container of the host's own is not converged: it differs, and ensure starts it.
      return {
        digest: `${info.labels[LABEL_SPEC_HASH] ?? ''}${info.state === 'running' ? '' : `:${info.state}`}`,
        fingerprint: `${info.id}|${info.image}`,
        original: async () => new TextEncoder().encode(JSON.stringify(document)),
        ...(runtime.keepImage ? { keep: () => runtime.keepImage!(document) } : {}),
      };
    },
    async write(spec, ctx) {
      await runtime.ensure(spec, { node: ctx.node, module: ctx.module, specHash: ctx.digest });
    },
    remove: (name) => runtime.remove(name),
  };
}

export function missingProvider(kind: ContentKind): MeshpError {
  return providerMissing(kind === 'file' ? 'a file store' : 'a container runtime');
}
