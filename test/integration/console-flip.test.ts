/**
 * Issue 30: the flip from the web console, on a real nftables machine. The lab's server namespace
 * (nft-lab.ts, prefix con2) runs the controller with its console, the agent with its nftables
 * firewall plugin and a found ruleset, and Debian's chromium, all on that namespace's loopback; the
 * client namespace probes. From the node's page: the converge preview is the CLI's, row for row; a
 * preview the node's declaration moved past while the page asked is refused with its code, shown on
 * the page; a module unassigned from the page; the flip confirmed from the page: the agent reports the
 * node converged (`node show --json`), and the machine's doors are as the preview said; the return
 * to adopted from the page brings the found firewall back.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE } from '@meshp/controller';
import { previewRows, type ConvergePreview } from '@meshp/core/lifecycle';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable } from '../helpers/nft-lab.js';
import { meshpIn, nsCluster } from '../helpers/lifecycle-lab.js';
import { chromiumAvailable, consoleErrors, consoleOf, launchChromium, seriousViolations, signInPage } from '../helpers/console.js';

if (!labAvailable() || !chromiumAvailable()) {
  t.plan(0, 'needs root for network namespaces and Debian chromium at /usr/bin/chromium');
  process.exit(0);
}

const SCREENS = join(process.cwd(), 'tmp', 'console-screens');

interface NodeJson {
  mode: string;
  gap: number;
  firewall: string;
  stateVersion: number;
  reportedVersion: number;
  convergePreviewId: string | null;
  lifecycle: { state: string; previewId: string } | null;
}

const l = await lab(t, { prefix: `con2${randomBytes(1).toString('hex')}` });
const dir = mkdtempSync(join(tmpdir(), `${l.prefix}-flip-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const configBefore = readFileSync(l.configFile);
await l.serve(l.server, 8080);
await l.serve(l.server, 9000);

const cluster = await nsCluster(t, l.server, dir, ['--console-listen', '127.0.0.1:0']);
const cli = (...args: string[]) => meshpIn(l.server, [...args, ...cluster.admin]);
const json = async <T>(...args: string[]): Promise<T> => {
  const r = await cli(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
};
const nodeOf = async (): Promise<NodeJson> => (await json<{ node: NodeJson }>('node', 'show', 'server')).node;
const tables = async () =>
  (JSON.parse(await l.nft(['-j', 'list', 'tables'])).nftables as Record<string, { family: string; name: string }>[])
    .filter((o) => o.table)
    .map((o) => `${o.table!.family} ${o.table!.name}`);

async function until<T>(what: string, fn: () => Promise<T | false | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    let last: unknown;
    const v = await fn().catch((e) => void (last = e));
    if (v) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out: ${what} (${String(last ?? 'not yet')}); agent: ${JSON.stringify(agent.lines.slice(-8))} ${agent.stderr}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const token = (await json<{ token: string }>('token', 'create', '--adopted')).token;
// A timer reconcile every 30 s: each step is a delta the agent reconciles at once, and a report that
// changes between the page's preview and its flip (a busybox child named as a holder) would make the
// flip stale for a reason this test does not mean.
const agent = cluster.agent('server', token, l.root, [], 30);
await agent.waitFor((x) => x.msg === 'enrolled');
const catalogue = join(dir, 'modules.json');
writeFileSync(
  catalogue,
  JSON.stringify({
    modules: [
      { name: 'web', openings: [{ port: 8080, path: 'incoming', from: [CLIENT_NET] }] },
      { name: 'jobs', openings: [{ port: 9000, path: 'incoming', from: [CLIENT_NET] }] },
    ],
  }),
);
await json('catalogue', 'add', catalogue, '--yes');
const assigned = await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'web', '--yes');
await agent.waitFor((x) => x.msg === 'reconciled' && Number(x.appliedVersion) >= assigned.node.stateVersion, 120_000);
await until('the adopted node reported the current version, its nftables firewall found', async () => {
  const n = await nodeOf();
  return n.gap === 0 && n.reportedVersion >= n.stateVersion && n.lifecycle?.state === 'adopted' && n.firewall === 'nftables' && n;
});

const at = consoleOf({ proc: cluster.controller, state: cluster.state });
const browser = await launchChromium(at, { ns: l.server, dir });
t.teardown(() => browser.close());
const page = await browser.newPage();
const errors = consoleErrors(page);
mkdirSync(SCREENS, { recursive: true });
const credential = readFileSync(join(cluster.state, ADMIN_CREDENTIAL_FILE), 'utf8').trim();
const cells = (table: string) => page.$$eval(`${table} tbody tr`, (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
const shownId = async () => (await page.textContent('#preview-text'))!.split(' ')[1]!.replace(':', '');
const cliPreview = async () => (await json<{ preview: ConvergePreview }>('node', 'converge', 'server', '--preview')).preview;

t.test("the node's page: its nftables firewall, and the converge preview the CLI computes, row for row", async (t) => {
  await page.goto(`${at.url}node.html?network=default&node=server`);
  await signInPage(page, credential, '#node-facts dt');
  const p = await cliPreview();
  await page.locator('#preview-text').filter({ hasText: p.id }).waitFor();
  t.match(await page.textContent('#node-facts'), /firewallnftables \(active\)/, 'the found firewall, active');
  const rows = await cells('#preview');
  t.same(rows, previewRows(p), "the page's preview rows are the CLI's, cell for cell");
  const byPort = (port: string) => rows.find((r) => r[0]?.startsWith(port));
  t.ok(byPort('8080/tcp'), 'the declared port is a row');
  t.ok(byPort('9000/tcp'), 'the undeclared listening port is a row');
  await page.screenshot({ path: join(SCREENS, 'flip-node-adopted.png'), fullPage: true });
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the node page of an nftables machine');
});

t.test('a preview the node moved past while the page asked is refused, with its code on the page; an unassign from the page', async (t) => {
  const before = await shownId();
  await page.click(`#actions button:has-text("Converge to preview ${before}")`);
  await page.locator('#confirm[open]').waitFor();
  t.match(await page.textContent('#confirm-text'), new RegExp(`^converge server to preview ${before} \\(adopted; assigned web; taken -\\): the flip`));
  await page.screenshot({ path: join(SCREENS, 'flip-confirm.png'), fullPage: true });
  // Meanwhile, through the CLI: a module that opens 9000 — the flip would now leave it open, not closed.
  const changed = await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'jobs', '--yes');
  await agent.waitFor((x) => x.msg === 'reconciled' && Number(x.appliedVersion) >= changed.node.stateVersion, 120_000);
  await page.locator('#preview-text').filter({ hasNotText: before }).waitFor({ timeout: 60_000 });
  await page.click('#confirm-yes');
  await page.locator('#action-result').filter({ hasText: 'MESHP_PREVIEW_STALE' }).waitFor();
  t.match(await page.textContent('#action-result'), `MESHP_PREVIEW_STALE: node server changed since preview ${before}`, 'refused, with its code, on the page');
  t.match(await nodeOf(), { mode: 'adopted', lifecycle: { state: 'adopted' } }, 'nothing flipped');
  t.ok((await tables()).includes('inet filter'), 'the found table is in place');
  t.match(errors.splice(0), [/422/], 'the refusal is the only console error');
  await page.screenshot({ path: join(SCREENS, 'flip-stale.png'), fullPage: true });
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation with the refusal shown');

  // The module unassigned from the page: said first, confirmed, and the preview is the one before it again.
  await page.click('#actions button:has-text("Unassign jobs")');
  await page.locator('#confirm[open]').waitFor();
  t.match(
    await page.textContent('#confirm-text'),
    /^unassign module jobs on node server \(adopted; assigned jobs, web; taken -\): held resources are left in place/,
  );
  await page.click('#confirm-yes');
  await until('the controller has jobs unassigned', async () => {
    const n = await json<{ node: { assignedModules?: string[]; modules?: string[] } }>('node', 'show', 'server');
    return !JSON.stringify(n.node).includes('jobs') && n;
  });
  await page.locator('#preview-text').filter({ hasText: before }).waitFor({ timeout: 60_000 });
  t.pass('unassigned from the page: the preview is the one before jobs again');
});

t.test('the flip confirmed from the page: the agent reports the node converged, the doors are as the preview said', async (t) => {
  const p = await cliPreview();
  await page.locator('#preview-text').filter({ hasText: p.id }).waitFor();
  const rows = await cells('#preview');
  t.same(rows, previewRows(p), 'the preview confirmed is the CLI’s');
  const after = (port: string) => rows.find((r) => r[0]?.startsWith(port))?.at(-1) ?? '';
  await page.click(`#actions button:has-text("Converge to preview ${p.id}")`);
  await page.locator('#confirm[open]').waitFor();
  await page.click('#confirm-yes');
  await page.locator('#action-result').filter({ hasText: 'converge asked of server' }).waitFor();
  const n = await until('the agent reports the node converged', async () => {
    const x = await nodeOf();
    return x.mode === 'converged' && x.lifecycle?.state === 'converged' && x;
  });
  t.match(n, { convergePreviewId: p.id, lifecycle: { previewId: p.id } }, 'converged to the preview the page showed, by its agent’s report');
  const [now, open8080, open9000] = await Promise.all([tables(), reachable(l.client, SERVER_CLIENT, 8080, 10), reachable(l.client, SERVER_CLIENT, 9000)]);
  t.ok(
    now.some((x) => /meshp/.test(x)),
    `the derived filter is loaded (${now.join(', ')})`,
  );
  t.notOk(now.includes('inet filter'), 'the found table is retired');
  t.same(readFileSync(l.configFile), configBefore, 'the found configuration is byte for byte on disk');
  t.match(after('8080/tcp'), /open/, `the preview said 8080 stays open (${after('8080/tcp')})`);
  t.ok(open8080, 'and it is open from the client');
  t.notMatch(after('9000/tcp'), /^(stays )?open/, `the preview said 9000 is not open after (${after('9000/tcp')})`);
  t.notOk(open9000, 'and it is closed');
  await page.locator('#node-facts').filter({ hasText: 'modeconverged' }).waitFor();
  await page.screenshot({ path: join(SCREENS, 'flip-converged.png'), fullPage: true });
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the converged node page');
});

t.test('back to adopted from the page: the found firewall again', async (t) => {
  await page.click('#actions button:has-text("Return to adopted")');
  await page.locator('#confirm[open]').waitFor();
  t.match(await page.textContent('#confirm-text'), /^adopt server \(converged; .*\): back to adopted/);
  await page.click('#confirm-yes');
  await until('the agent reports the node adopted', async () => {
    const x = await nodeOf();
    return x.mode === 'adopted' && x.lifecycle?.state === 'adopted' && x;
  });
  const [now, open8080, open9000] = await Promise.all([tables(), reachable(l.client, SERVER_CLIENT, 8080, 10), reachable(l.client, SERVER_CLIENT, 9000)]);
  t.ok(now.includes('inet filter'), `the found table is back (${now.join(', ')})`);
  t.same(readFileSync(l.configFile), configBefore);
  t.ok(open8080, '8080 open through the found firewall');
  t.notOk(open9000, 'the found firewall drops 9000 again');
  await page.locator('#node-facts').filter({ hasText: 'modeadopted' }).waitFor();
  await page.locator(`#actions button:has-text("Converge to preview")`).waitFor();
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the node page adopted again');
  t.same(errors, [], 'no console errors');
});
