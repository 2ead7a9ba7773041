/**
 * A query the mesh does not answer, handed as it came to the nameservers that answer it (a split
 * domain's own, else the component's, else the machine's found ones): each tried in turn, over UDP
 * from a fresh socket (a random source port per query), over TCP when the answer came truncated or
 * the client asked over TCP. The answer goes back as the upstream sent it.
 */
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import dnsPacket from 'dns-packet';

export interface Upstream {
  address: string;
  port: number;
}

export const FORWARD_TIMEOUT_MS = 2000;

function overUdp(u: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = createSocket(u.address.includes(':') ? 'udp6' : 'udp4');
    const done = (e: Error | null, b?: Buffer) => {
      clearTimeout(timer);
      s.close();
      if (e) reject(e);
      else resolve(b!);
    };
    const timer = setTimeout(() => done(new Error(`${u.address}:${u.port} did not answer in ${timeoutMs} ms`)), timeoutMs);
    s.on('error', (e) => done(e));
    s.on('message', (msg, rinfo) => {
      // Only the upstream asked, with the query's id.
      if (rinfo.address === u.address && rinfo.port === u.port && msg.length >= 2 && msg.readUInt16BE(0) === query.readUInt16BE(0)) done(null, msg);
    });
    s.send(query, u.port, u.address, (e) => e && done(e));
  });
}

function overTcp(u: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.address, port: u.port });
    let buf = Buffer.alloc(0);
    const done = (e: Error | null, b?: Buffer) => {
      clearTimeout(timer);
      s.destroy();
      if (e) reject(e);
      else resolve(b!);
    };
    const timer = setTimeout(() => done(new Error(`${u.address}:${u.port} did not answer over TCP in ${timeoutMs} ms`)), timeoutMs);
    s.on('error', (e) => done(e));
    s.on('connect', () => s.write(dnsPacket.streamEncode(dnsPacket.decode(query))));
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(null, buf.subarray(2, 2 + buf.readUInt16BE(0)));
    });
    s.on('end', () => done(new Error(`${u.address}:${u.port} closed the TCP connection before answering`)));
  });
}

const truncated = (b: Buffer): boolean => {
  try {
    return (dnsPacket.decode(b).flags ?? 0) & dnsPacket.TRUNCATED_RESPONSE ? true : false;
  } catch {
    return false;
  }
};

/** The first answer of the upstreams, in order; the errors of all when none answered. */
export async function forward(upstreams: readonly Upstream[], query: Buffer, o: { tcp: boolean; timeoutMs?: number }): Promise<Buffer> {
  const timeoutMs = o.timeoutMs ?? FORWARD_TIMEOUT_MS;
  const errors: string[] = [];
  for (const u of upstreams) {
    try {
      if (o.tcp) return await overTcp(u, query, timeoutMs);
      const b = await overUdp(u, query, timeoutMs);
      return truncated(b) ? await overTcp(u, query, timeoutMs).catch(() => b) : b;
    } catch (e) {
      errors.push(e instanceof Error ? e.message : String(e));
    }
  }
  throw new Error(upstreams.length ? `no nameserver answered: ${errors.join('; ')}` : 'no nameserver to forward to');
}
