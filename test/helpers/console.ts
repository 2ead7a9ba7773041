/**
 * The web console from a test: its URL from the controller's "controller serving" line, plain HTTPS
 * requests that trust only the controller's own certificate (for the attacks a browser would not
 * make), and Debian's chromium driven headless by playwright-core, pinned to that certificate by its
 * public key (nothing is downloaded at test time; the browser is the system's).
 */
import { createHash, createPublicKey } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import type { ControllerProc } from './grpc-procs.js';
import type { Netns } from './netns.js';

export const CHROMIUM = '/usr/bin/chromium';

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM);
}

export interface ConsoleAt {
  url: string;
  certPem: string;
  /** base64 SHA-256 of the certificate's public key: what chromium is told to trust, and nothing else. */
  spki: string;
}

/** `ctl`: a controller of grpc-procs.ts, or one run in a lab namespace (lifecycle-lab.ts nsCluster: its process and state folder). */
export function consoleOf(ctl: Pick<ControllerProc, 'proc' | 'state'>): ConsoleAt {
  const line = ctl.proc.lines.find((l) => l.msg === 'controller serving');
  const url = line?.console;
  if (typeof url !== 'string') throw new Error('the controller serves no console');
  const certPem = readFileSync(join(ctl.state, 'tls', 'controller.crt'), 'utf8');
  const der = createPublicKey(certPem).export({ type: 'spki', format: 'der' });
  return { url, certPem, spki: createHash('sha256').update(der).digest('base64') };
}

/**
 * `ns`: chromium runs inside that lab namespace (a console on the namespace's loopback), through a
 * script in `dir` that enters its network and execs the browser (the same pid: playwright ends it).
 */
export async function launchChromium(at: ConsoleAt, inside?: { ns: Netns; dir: string }): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  let executablePath = CHROMIUM;
  if (inside) {
    executablePath = join(inside.dir, 'chromium-in-netns');
    writeFileSync(executablePath, `#!/bin/sh\nexec nsenter --net=${inside.ns.path} -- ${CHROMIUM} "$@"\n`, { mode: 0o700 });
  }
  return chromium.launch({ executablePath, args: [`--ignore-certificate-errors-spki-list=${at.spki}`] });
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The peer certificate's SHA-256 (DER), lower-case hex without colons. */
  fingerprint: string;
}

/**
 * One HTTPS request to the console, trusting only the controller's certificate. An event stream is
 * read for `streamMs` and then cut (its first events are all a test needs).
 */
export function https(
  at: ConsoleAt,
  method: string,
  path: string,
  o: { headers?: Record<string, string>; body?: string; streamMs?: number } = {},
): Promise<Answer> {
  const u = new URL(path, at.url);
  return new Promise((resolve, reject) => {
    const req = request(
      u,
      { method, ca: at.certPem, agent: false, headers: { ...(o.body ? { 'content-type': 'application/json' } : {}), ...o.headers } },
      (res) => {
        const sock = res.socket as import('node:tls').TLSSocket;
        const fingerprint = (sock.getPeerCertificate().fingerprint256 ?? '').replace(/:/g, '').toLowerCase();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        const done = () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, fingerprint });
        res.once('end', done);
        if (String(res.headers['content-type']).startsWith('text/event-stream')) {
          setTimeout(() => {
            res.destroy();
            done();
          }, o.streamMs ?? 1_500);
        }
      },
    );
    req.once('error', reject);
    req.end(o.body);
  });
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core run on the page as it is now: its serious and critical violations, each as `id: help (n)`.
 * Evaluated through the browser's debugging protocol, so the page's content security policy (scripts
 * from the console only) stays in force for everything else.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const r = await page.evaluate(() =>
    (window as unknown as { axe: { run(): Promise<{ violations: { id: string; help: string; impact: string | null; nodes: unknown[] }[] }> } }).axe.run(),
  );
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help} (${v.nodes.length})`);
}

/** A session of the console over plain HTTPS (POST /api/session): its cookie header and CSRF token. */
export async function sessionOf(at: ConsoleAt, credentialText: string): Promise<{ cookie: string; csrf: string }> {
  const r = await https(at, 'POST', '/api/session', { body: JSON.stringify({ credential: credentialText }) });
  if (r.status !== 200) throw new Error(`sign-in refused: ${r.status} ${r.body}`);
  return { cookie: String(r.headers['set-cookie']).split(';')[0]!, csrf: (JSON.parse(r.body) as { csrf: string }).csrf };
}

/** The first event of a live stream (`/api/live/...`), parsed: what a page is sent first. */
export async function liveOnce<T>(at: ConsoleAt, cookie: string, path: string): Promise<T> {
  const r = await https(at, 'GET', path, { headers: { cookie } });
  const data = /^data: (.*)$/m.exec(r.body)?.[1];
  if (r.status !== 200 || data === undefined) throw new Error(`${path}: ${r.status} ${r.body.slice(0, 300)}`);
  return JSON.parse(data) as T;
}

/** Signs in on the page the browser shows (the sign-in form), then waits for `ready` (a selector of the page signed in). */
export async function signInPage(page: Page, credentialText: string, ready: string): Promise<void> {
  await page.locator('#signin').waitFor({ state: 'visible' });
  await page.fill('#credential', credentialText);
  await page.click('#signin button[type=submit]');
  await page.locator(ready).first().waitFor();
}

/** Console errors and page errors of a page, as they come. */
export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(e.message));
  return errors;
}
