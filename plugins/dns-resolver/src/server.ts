/**
 * The resolver's sockets on the node's mesh address: UDP and TCP on one port (53), each query handed
 * to `answer`. TCP messages are framed by their two-byte length (RFC 1035 4.2.2); a connection is
 * closed after a while idle, and a message larger than a DNS message can be ends it.
 */
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server, type Socket as TcpSocket } from 'node:net';

export type Answer = (query: Buffer, tcp: boolean) => Promise<Buffer | null>;

const TCP_IDLE_MS = 10_000;

export interface Listening {
  address: string;
  port: number;
  close(): Promise<void>;
}

function serveUdp(address: string, port: number, answer: Answer): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createSocket({ type: address.includes(':') ? 'udp6' : 'udp4' });
    s.once('error', reject);
    s.on('message', (msg, rinfo) => {
      void answer(msg, false).then((out) => {
        if (out) s.send(out, rinfo.port, rinfo.address);
      });
    });
    s.bind(port, address, () => {
      s.off('error', reject);
      s.on('error', () => undefined);
      resolve(s);
    });
  });
}

function serveTcp(address: string, port: number, answer: Answer, conns: Set<TcpSocket>): Promise<Server> {
  const server = createServer((c) => {
    conns.add(c);
    c.on('close', () => conns.delete(c));
    let buf = Buffer.alloc(0);
    c.setTimeout(TCP_IDLE_MS, () => c.destroy());
    c.on('error', () => undefined);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        void answer(Buffer.from(msg), true).then((out) => {
          if (!out || c.destroyed) return;
          const len = Buffer.alloc(2);
          len.writeUInt16BE(out.length);
          c.write(Buffer.concat([len, out]));
        });
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Both sockets, or neither: a port held by another resolver is refused with its error. */
export async function listen(address: string, port: number, answer: Answer): Promise<Listening> {
  const udp = await serveUdp(address, port, answer);
  const bound = udp.address().port;
  let tcp: Server;
  const conns = new Set<TcpSocket>();
  try {
    tcp = await serveTcp(address, bound, answer, conns);
  } catch (e) {
    udp.close();
    throw e;
  }
  return {
    address,
    port: bound,
    close: async () => {
      udp.close();
      for (const c of conns) c.destroy();
      await new Promise<void>((r) => tcp.close(() => r()));
    },
  };
}
