/**
 * The controller's version key, made on first start in the state folder (0600): every version sent
 * carries a tag of (network, version, state hash) that only this key makes, so a hello claiming a
 * version past the network's proves it came from a controller of this state. A backup of the state
 * folder carries the key, so a restored controller recognises its own tags.
 *
 * Only the controller ever checks a tag (the agent stores it and hands it back in its hello), so it
 * is an HMAC-SHA256 (ADR 0037): about 1 µs where the Ed25519 signature it replaces was 51–66 µs per
 * agent-delta. The MAC key is derived (HKDF-SHA256) from the Ed25519 key the file has held since
 * ADR 0012, so the file, its backups and the replicas' copies stay as they are; a 64-byte tag is an
 * older controller's Ed25519 signature, still honoured.
 */
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, timingSafeEqual, verify } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { VersionSigner } from '../controller.js';

export const VERSION_KEY_FILE = 'controller.version.key';
/** The length of an Ed25519 signature: a tag an older controller made. */
const ED25519_SIGNATURE_BYTES = 64;

export function ensureVersionKey(stateDir: string): VersionSigner {
  const file = join(stateDir, VERSION_KEY_FILE);
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  }
  chmodSync(file, 0o600);
  const key = createPrivateKey(readFileSync(file));
  const pub = createPublicKey(key);
  const secret = Buffer.from(hkdfSync('sha256', key.export({ type: 'pkcs8', format: 'der' }), 'meshp', 'meshp-version-mac-v1', 32));
  const mac = (payload: Uint8Array): Buffer => createHmac('sha256', secret).update(payload).digest();
  return {
    sign: mac,
    verify: (payload, signature) => {
      try {
        if (signature.length === ED25519_SIGNATURE_BYTES) return verify(null, payload, pub, signature);
        const want = mac(payload);
        return signature.length === want.length && timingSafeEqual(want, signature);
      } catch {
        return false;
      }
    },
  };
}
