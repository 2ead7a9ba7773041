/** The node's own Ed25519 key pair, made on first start and kept in its state folder (0600). */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const NODE_KEY_FILE = 'node.key';

export interface NodeKey {
  /** SPKI DER, base64: what the controller stores and checks signatures with. */
  publicKey: string;
  sign(payload: Uint8Array): Uint8Array;
}

export function ensureNodeKey(stateDir: string): NodeKey {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const file = join(stateDir, NODE_KEY_FILE);
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  }
  chmodSync(file, 0o600);
  const key = createPrivateKey(readFileSync(file));
  const publicKey = createPublicKey(key).export({ type: 'spki', format: 'der' }).toString('base64');
  return { publicKey, sign: (payload) => sign(null, payload, key) };
}
