/**
 * A stand-in Docker engine on a unix socket, for faults a real engine will not produce on demand
 * (a rollback that fails, an engine that accepts and never answers). Routes are matched on
 * "METHOD /path" without the query; every request is recorded.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Teardownable } from './netns.js';

export interface FakeReply {
  status: number;
  body?: unknown;
}

export type FakeRoute = (req: IncomingMessage, body: string) => FakeReply | 'hang';

export interface FakeEngine {
  socket: string;
  requests: string[];
  route(key: string, reply: FakeReply | FakeRoute | 'hang'): void;
}

export async function fakeEngine(t: Teardownable): Promise<FakeEngine> {
  const dir = mkdtempSync('/tmp/dkf');
  const socket = join(dir, 'fake.sock');
  const routes = new Map<string, FakeRoute>();
  const requests: string[] = [];
  const hanging = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const path = (req.url ?? '').replace(/^\/v[0-9.]+/, '').split('?')[0]!;
      const key = `${req.method} ${decodeURIComponent(path)}`;
      requests.push(`${req.method} ${req.url}`);
      const route = routes.get(key);
      const reply = route ? route(req, body) : { status: 404, body: { message: `fake engine: no route ${key}` } };
      if (reply === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  t.teardown(async () => {
    for (const res of hanging) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    socket,
    requests,
    route(key, reply) {
      routes.set(key, typeof reply === 'function' ? reply : () => reply);
    },
  };
}

/** A minimal inspect document, as a Docker 20.10 engine answers it. */
export function inspectDoc(name: string, id: string, labels: Record<string, string>, running = true): Record<string, unknown> {
  return {
    Id: id,
    Name: `/${name}`,
    State: { Status: running ? 'running' : 'exited', Running: running },
    Config: { Image: 'lab/busybox:1', Labels: labels },
    NetworkSettings: { Ports: running ? { '80/tcp': [{ HostIp: '0.0.0.0', HostPort: '18080' }] } : {} },
  };
}
