/**
 * The controller's own certificate, made on first start with openssl (a kept tool, not hand-rolled
 * ASN.1) into its state folder. Agents pin its SHA-256, which their tokens carry.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { normaliseFingerprint } from '@meshp/core/agent';

export interface ControllerTls {
  certPem: string;
  keyPem: string;
  /** SHA-256 of the certificate (DER), lower-case hex. */
  fingerprint: string;
  certFile: string;
}

export function certificateFingerprint(certPem: string): string {
  return normaliseFingerprint(new X509Certificate(certPem).fingerprint256);
}

export function ensureCertificate(stateDir: string, names: string[] = []): ControllerTls {
  const dir = join(stateDir, 'tls');
  const certFile = join(dir, 'controller.crt');
  const keyFile = join(dir, 'controller.key');
  if (!existsSync(certFile) || !existsSync(keyFile)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const san = ['DNS:localhost', 'IP:127.0.0.1', ...names.map((n) => (/^[\d.]+$/.test(n) ? `IP:${n}` : `DNS:${n}`))];
    const tmpKey = `${keyFile}.tmp`;
    const tmpCert = `${certFile}.tmp`;
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          tmpKey,
          '-out',
          tmpCert,
          '-days',
          '3650',
          '-subj',
          '/CN=meshp-controller',
          '-addext',
          `subjectAltName=${[...new Set(san)].join(',')}`,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
    } catch (cause) {
      throw new MeshpError('MESHP_PROVIDER_MISSING', 'openssl could not make the controller certificate (is openssl installed?)', { cause });
    }
    chmodSync(tmpKey, 0o600);
    renameSync(tmpKey, keyFile);
    renameSync(tmpCert, certFile);
  }
  chmodSync(keyFile, 0o600);
  const certPem = readFileSync(certFile, 'utf8');
  return { certPem, keyPem: readFileSync(keyFile, 'utf8'), fingerprint: certificateFingerprint(certPem), certFile };
}
