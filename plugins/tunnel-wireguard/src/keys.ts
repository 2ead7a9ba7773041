/**
 * The node's WireGuard key pair (Curve25519), apart from its Ed25519 node key: the node key signs
 * the Sync challenge, this one speaks WireGuard. Kept in the state folder, mode 0600, as `wg genkey`
 * writes it (base64 of the 32 raw bytes), so the `wg` tool can read it too.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';

export interface TunnelKey {
  /** base64, 32 bytes: what the controller stores and peers configure. */
  publicKey: string;
  /** base64, 32 bytes. */
  privateKey: string;
  file: string;
}

/** PKCS#8 header of an X25519 private key: the raw 32 bytes follow it. */
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');

export function publicKeyOf(privateKey: string): string {
  const raw = Buffer.from(privateKey, 'base64');
  if (raw.length !== 32) throw new MeshpError('MESHP_TUNNEL_FAILED', 'a WireGuard private key is 32 bytes in base64');
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_X25519, raw]), format: 'der', type: 'pkcs8' });
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  return Buffer.from(jwk.x as string, 'base64url').toString('base64');
}

export function generatePrivateKey(): string {
  const { privateKey } = generateKeyPairSync('x25519');
  return Buffer.from(privateKey.export({ format: 'jwk' }).d as string, 'base64url').toString('base64');
}

/** Made on first use; the file's mode is set back to 0600 whenever it is read. */
export function ensureTunnelKey(dir: string, name: string): TunnelKey {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${name}.key`);
  if (!existsSync(file)) writeFileSync(file, generatePrivateKey() + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  const privateKey = readFileSync(file, 'utf8').trim();
  return { privateKey, publicKey: publicKeyOf(privateKey), file };
}

/** UAPI speaks keys in hex; everything else (wg, the controller) in base64. */
export const keyToHex = (b64: string): string => Buffer.from(b64, 'base64').toString('hex');
export const keyFromHex = (hex: string): string => Buffer.from(hex, 'hex').toString('base64');

export function isTunnelKey(b64: string): boolean {
  return /^[A-Za-z0-9+/]{43}=$/.test(b64);
}

/**
 * A new key pair in place of the node's (issue 28, meshp node rekey): written beside the key file and
 * renamed over it (a crash leaves the old key or the new one, whole, never half a file), mode 0600.
 */
export function renewTunnelKey(dir: string, name: string): TunnelKey {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${name}.key`);
  const tmp = `${file}.new`;
  const privateKey = generatePrivateKey();
  writeFileSync(tmp, privateKey + '\n', { mode: 0o600 });
  renameSync(tmp, file);
  return { privateKey, publicKey: publicKeyOf(privateKey), file };
}
