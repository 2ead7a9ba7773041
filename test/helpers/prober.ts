/**
 * A prober living in a lab namespace for the whole run: one python process, started once, asked
 * over stdin for a TCP connection with an HTTP answer or for the fate of a bare TCP ACK. Starting an
 * interpreter (or nc) per probe cost seconds per fixture on a loaded machine; probes asked at once
 * run side by side in threads, each on its own connection or raw socket.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Netns } from './netns.js';
import { reaper } from './ipt-lab.js';
import type { Teardownable } from './netns.js';

const PROBER = String.raw`
import json, random, socket, struct, sys, threading, time
out = threading.Lock()

def reach(host, port, wait):
    # A real TCP connection and an HTTP answer, each step bounded by wait seconds (as nc -w).
    try:
        s = socket.create_connection((host, port), timeout=wait)
        s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        data = b''
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        s.close()
        return b'HTTP/1.' in data
    except OSError:
        return False

def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff

def ack(src, dst, port, wait):
    # Whether a bare ACK (no connection) is answered with a RST.
    sport = random.randint(20000, 60000)
    h = struct.pack('!HHIIBBHHH', sport, port, random.randint(1, 2**31), random.randint(1, 2**31), 5 << 4, 0x10, 65535, 0, 0)
    c = csum(socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 6, len(h)) + h)
    h = h[:16] + struct.pack('!H', c) + h[18:]
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    s.settimeout(0.05)
    s.sendto(h, (dst, 0))
    end = time.time() + wait
    last = False
    while True:
        # One more read after the deadline: a RST queued while this thread was not scheduled still counts.
        if time.time() >= end: last = True
        try:
            d, a = s.recvfrom(65535)
        except socket.timeout:
            if last: return False
            continue
        if a[0] != dst: continue
        t = d[(d[0] & 15) * 4:]
        if struct.unpack('!HH', t[:4]) == (port, sport) and t[13] & 4: return True
        if last: return False

def handle(line):
    q = json.loads(line)
    r = reach(q['host'], q['port'], q['wait']) if q['op'] == 'reach' else ack(q['src'], q['host'], q['port'], q['wait'])
    with out:
        sys.stdout.write(json.dumps({'id': q['id'], 'ok': r}) + '\n'); sys.stdout.flush()

print('ready', flush=True)
for line in sys.stdin:
    threading.Thread(target=handle, args=(line,), daemon=True).start()
`;

export interface Prober {
  /** A real TCP connection and an HTTP answer, each step bounded by one second. */
  reach(host: string, port: number): Promise<boolean>;
  /** Whether a bare TCP ACK from `src` to host:port is answered with a RST (waits one second for it). */
  answersAck(src: string, host: string, port: number): Promise<boolean>;
}

export async function prober(t: Teardownable, ns: Netns): Promise<Prober> {
  const child = spawn('nsenter', [`--net=${ns.path}`, '--', 'python3', '-u', '-c', PROBER], { stdio: ['pipe', 'pipe', 'inherit'] });
  reaper(t).push(child);
  const waiting = new Map<number, (ok: boolean) => void>();
  let ready: () => void = () => undefined;
  const started = new Promise<void>((r) => (ready = r));
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'ready') return ready();
    const { id, ok } = JSON.parse(line) as { id: number; ok: boolean };
    waiting.get(id)?.(ok);
    waiting.delete(id);
  });
  const gone = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`prober in ${ns.name} exited (${code})`))));
  gone.catch(() => undefined);
  await Promise.race([started, gone]);
  let next = 0;
  const ask = (q: Record<string, unknown>) => {
    const id = next++;
    const answer = new Promise<boolean>((resolve) => waiting.set(id, resolve));
    child.stdin.write(`${JSON.stringify({ ...q, id, wait: 1 })}\n`);
    return Promise.race([answer, gone]);
  };
  return {
    reach: (host, port) => ask({ op: 'reach', host, port }),
    answersAck: (src, host, port) => ask({ op: 'ack', src, host, port }),
  };
}
