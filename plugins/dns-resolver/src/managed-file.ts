/**
 * A converged node's `/etc/resolv.conf`, where it is a plain file no manager writes: the mesh's to
 * manage, as a file of the plan (record 0002: converged, the machine is the mesh's to shape). Its
 * original — bytes, mode and owner, or that there was none — is recorded in the host's state first,
 * then the file names the mesh's resolver first, the machine's own nameservers after it (where the
 * resolver forwards the rest), and the search list of the DNS component. On the return to adopted,
 * and when the node leaves, the original is put back byte for byte. An adopted node's file is never
 * written (the guard's rule: what is found stays).
 */
import { resourceKey, type Action, type FileStat, type FileStore, type HostStateStore, type Plan } from '@meshp/core';
import { nameserversOf } from './resolv-conf.js';

export const RESOLV_CONF_PATH = '/etc/resolv.conf';
/** The host state's value holding the original until it is put back. */
export const ORIGINAL_KEY = 'dns.resolv-conf.original';
export const DNS_FILE_MODULE = 'dns';

export type RecordedOriginal = { absent: true } | { absent?: false; bytes: string; mode: number; uid?: number; gid?: number; at: string };

/** What the managed file says: the mesh's resolver, then (up to two of) the original's nameservers, the search list, the original's options. */
export function managedText(original: string, self: string, domain: string, searchDomains: readonly string[]): string {
  const others = nameserversOf(original)
    .map((u) => u.address)
    .filter((a) => a !== self)
    .slice(0, 2);
  const options = original.split('\n').filter((l) => /^\s*options\s/.test(l));
  return [
    "# The mesh's resolver first, then the machine's own: written by meshp on this converged node.",
    '# The file it replaced is put back byte for byte when the node returns to adopted or leaves.',
    `nameserver ${self}`,
    ...others.map((a) => `nameserver ${a}`),
    `search ${[domain, ...searchDomains.filter((d) => d !== domain)].join(' ')}`,
    ...options,
    '',
  ].join('\n');
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const originalText = (r: RecordedOriginal | null, now: FileStat | null) => (r && !r.absent ? text(Buffer.from(r.bytes, 'base64')) : now ? text(now.bytes) : '');

export interface Want {
  address: string;
  domain: string;
  searchDomains: readonly string[];
}

/** Puts the recorded original back (or removes the file, when there was none) and forgets it. */
export async function restoreOriginal(files: FileStore, store: HostStateStore): Promise<boolean> {
  const r = await store.getValue<RecordedOriginal>(ORIGINAL_KEY);
  if (!r) return false;
  if (r.absent) await files.remove(RESOLV_CONF_PATH);
  else
    await files.write(RESOLV_CONF_PATH, Buffer.from(r.bytes, 'base64'), r.mode, {
      ...(r.uid !== undefined && r.gid !== undefined ? { owner: { uid: r.uid, gid: r.gid } } : {}),
    });
  await store.setValue(ORIGINAL_KEY, null);
  return true;
}

/**
 * The plan's action for the file: converged with a plain file (or the one it manages), written or
 * kept; adopted with an original recorded (the return), put back; otherwise none. `done` is told
 * whether the mesh manages it once the action ran.
 */
export async function resolvConfAction(
  plan: Plan,
  files: FileStore,
  store: HostStateStore,
  plainFile: boolean,
  want: Want | null,
  done: (managed: boolean) => void,
): Promise<Action | null> {
  const key = resourceKey('file', RESOLV_CONF_PATH);
  const base = { key, kind: 'file' as const, module: DNS_FILE_MODULE, by: 'dns-resolver' };
  const recorded = await store.getValue<RecordedOriginal>(ORIGINAL_KEY);
  if (plan.mode !== 'converged') {
    if (!recorded) return null;
    return {
      ...base,
      op: 'release',
      state: 'released',
      reason: 'the original put back byte for byte: the node is adopted again',
      run: async () => {
        await restoreOriginal(files, store);
        done(false);
      },
    };
  }
  if (!want || (!plainFile && !recorded)) return null;
  const now = await files.read(RESOLV_CONF_PATH);
  const desired = managedText(originalText(recorded, now), want.address, want.domain, want.searchDomains);
  if (now && text(now.bytes) === desired) {
    done(true);
    return { ...base, op: 'keep', state: 'owned', reason: "the mesh's resolver first; its original recorded" };
  }
  return {
    ...base,
    op: 'converge',
    state: 'owned',
    spec: { path: RESOLV_CONF_PATH, content: desired },
    reason: recorded ? 'differs from what the mesh wrote' : "found; its original recorded, then the mesh's resolver named first",
    run: async () => {
      const cur = await files.read(RESOLV_CONF_PATH);
      if (!(await store.getValue<RecordedOriginal>(ORIGINAL_KEY))) {
        const original: RecordedOriginal = cur
          ? {
              bytes: Buffer.from(cur.bytes).toString('base64'),
              mode: cur.mode,
              ...(cur.uid !== undefined && cur.gid !== undefined ? { uid: cur.uid, gid: cur.gid } : {}),
              at: new Date().toISOString(),
            }
          : { absent: true };
        await store.setValue(ORIGINAL_KEY, original);
      }
      await files.write(RESOLV_CONF_PATH, new TextEncoder().encode(desired), cur?.mode ?? 0o644, { expect: cur?.identity ?? null });
      done(true);
    },
  };
}
