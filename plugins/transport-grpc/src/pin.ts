/**
 * Pinning the controller's self-signed certificate by its SHA-256. The agent knows only the
 * fingerprint (from its token, or the admin credential): it reads the certificate the server
 * presents, refuses it unless the fingerprint matches, then trusts exactly that certificate for
 * the gRPC channel, whose identity check compares the fingerprint again on every connection.
 */
import { connect, type PeerCertificate } from 'node:tls';
import { credentials, type ChannelCredentials } from '@grpc/grpc-js';
import { MeshpError } from '@meshp/core';
import { normaliseFingerprint } from '@meshp/core/agent';
import { usage } from '@meshp/core/util';

function splitAddress(address: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) throw usage(`${address} is not HOST:PORT`);
  return { host: m[1]!, port: Number(m[2]) };
}

function toPem(raw: Buffer): string {
  const b64 = raw
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trimEnd();
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** Reads the certificate the server presents and checks it against the pin. */
export function fetchPinnedCertificate(address: string, fingerprint: string, timeoutMs = 5_000): Promise<string> {
  const want = normaliseFingerprint(fingerprint);
  const { host, port } = splitAddress(address);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ['h2'], servername: host.match(/^[\d.:]+$/) ? undefined : host });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new MeshpError('MESHP_UNAVAILABLE', `no TLS answer from ${address} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const cert = socket.getPeerCertificate(true);
      socket.end();
      const got = cert?.fingerprint256 ? normaliseFingerprint(cert.fingerprint256) : '';
      if (got !== want) {
        reject(new MeshpError('MESHP_TLS_PIN', `the controller at ${address} presents certificate ${got || 'none'}, not the pinned ${want}`));
        return;
      }
      resolve(toPem(cert.raw));
    });
    socket.once('error', (cause) => {
      clearTimeout(timer);
      reject(new MeshpError('MESHP_UNAVAILABLE', `cannot reach the controller at ${address}: ${cause.message}`, { cause }));
    });
  });
}

/** Pinned: the name is not what is checked (an IP in SNI is not allowed anyway), the fingerprint is. */
export const PINNED_NAME = 'meshp-controller';

/** Channel credentials that accept only the pinned certificate. */
export function pinnedCredentials(certPem: string, fingerprint: string): ChannelCredentials {
  const want = normaliseFingerprint(fingerprint);
  return credentials.createSsl(Buffer.from(certPem), null, null, {
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      normaliseFingerprint(cert.fingerprint256 ?? '') === want
        ? undefined
        : new MeshpError('MESHP_TLS_PIN', `certificate ${cert.fingerprint256} is not the pinned ${want}`),
  });
}
