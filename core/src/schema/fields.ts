/** The fields every input shares: names, paths, modes, ports, ranges — one definition each. */
import { z } from 'zod';
import { parseRange } from '../net/address.js';

/** A MESHP code for an issue other than MESHP_DECLARATION_INVALID travels in the issue's params. */
export const meshpCode = (code: string) => ({ meshp: code });

export const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
export const name = z.string().regex(NAME, 'must be a simple name (letters, digits, _ . -; up to 128; not starting with a sign)');
/** Docker's own rule for a container name: two characters at least (the fuzz test found "x" accepted here and refused by the engine). */
export const containerName = z
  .string()
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,127}$/, 'must be a container name (2 to 128 of letters, digits, _ . -; not starting with a sign)');

/** An absolute path with no `.` or `..` segment, no empty segment and no NUL. */
export const path = z.string().superRefine((p, ctx) => {
  if (!p.startsWith('/'))
    return void ctx.addIssue({ code: 'custom', message: `path must be absolute, got ${JSON.stringify(p)}`, params: meshpCode('MESHP_PATH_INVALID') });
  if (p.includes('\0')) return void ctx.addIssue({ code: 'custom', message: 'path contains a NUL byte', params: meshpCode('MESHP_PATH_INVALID') });
  const segments = p.split('/').slice(1);
  if (segments.some((s) => s === '..' || s === '.'))
    return void ctx.addIssue({ code: 'custom', message: `path ${p} has a "." or ".." segment`, params: meshpCode('MESHP_PATH_ESCAPES_ROOT') });
  if (p.length > 1 && segments.some((s) => s === ''))
    ctx.addIssue({ code: 'custom', message: `path ${p} has an empty segment`, params: meshpCode('MESHP_PATH_INVALID') });
});

/** Permission bits only, e.g. "0644": setuid, setgid and sticky bits are not a module's to set. */
export const fileMode = z.string().regex(/^0?[0-7]{3}$/, 'must be octal permission bits like "0644" (no setuid, setgid or sticky bit)');

export const port = z
  .number({ error: 'must be a port 1..65535' })
  .int('must be a port 1..65535')
  .min(1, 'must be a port 1..65535')
  .max(65535, 'must be a port 1..65535');
export const protocol = z.enum(['tcp', 'udp'], { error: 'must be tcp or udp' });
export const trafficPath = z.enum(['incoming', 'forwarded'], { error: 'must be incoming or forwarded' });

/** A range the one address module reads ("10.0.0.0/8", "fd00::/8", a bare address). */
export const range = z
  .string()
  .max(64)
  .refine((r) => {
    try {
      parseRange(r);
      return true;
    } catch {
      return false;
    }
  }, 'must be an address range like 10.0.0.0/8 or fd00::/8');

/** A catalogue module may put a node's setting where a value goes: "{{ports.NAME}}", "{{privateRange}}". */
const PORT_PLACEHOLDER = /^\{\{\s*ports\.[a-zA-Z0-9_-]+\s*\}\}$/;
export const portOrPlaceholder = z.union([port, z.string().regex(PORT_PLACEHOLDER, 'must be a port 1..65535 or "{{ports.NAME}}"')]);
export const rangeOrPlaceholder = z.union([range, z.string().regex(/^\{\{\s*privateRange\s*\}\}$/)]);
