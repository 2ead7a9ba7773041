/**
 * The controller's version key (Ed25519), made on first start in the state folder (0600): it signs
 * every version sent, so a hello claiming a version past the network's proves it with a signature a
 * controller of this state made. A backup of the state folder carries the key, so a restored
 * controller recognises its own signatures.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { VersionSigner } from '../controller.js';

export const VERSION_KEY_FILE = 'controller.version.key';

export function ensureVersionKey(stateDir: string): VersionSigner {
  const file = join(stateDir, VERSION_KEY_FILE);
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  }
  chmodSync(file, 0o600);
  const key = createPrivateKey(readFileSync(file));
  const pub = createPublicKey(key);
  return {
    sign: (payload) => sign(null, payload, key),
    verify: (payload, signature) => {
      try {
        return verify(null, payload, pub, signature);
      } catch {
        return false;
      }
    },
  };
}
