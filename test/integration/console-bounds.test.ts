/**
 * Issue 30, what the console keeps and what it bounds, against a real controller in Debian's chromium:
 * the convergence history is kept in the controller's store (`--console-history`, `--console-sample`)
 * and the chart's samples are there again after a restart; the reachability matrix of a network of more
 * than 200 nodes is not drawn (nor computed), the page says so, and a filter by node or tag gets the
 * pairs it keeps from the controller, and only those.
 */
import t from 'tap';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { adminCalls, meshpAsync, startController, tokenFor, workdir } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { chromiumAvailable, consoleErrors, consoleOf, https, launchChromium, liveOnce, seriousViolations, sessionOf, signInPage } from '../helpers/console.js';

if (!chromiumAvailable()) {
  t.plan(0, 'needs Debian chromium at /usr/bin/chromium (make apt installs it)');
  process.exit(0);
}

const SCREENS = join(process.cwd(), 'tmp', 'console-screens');

interface History {
  at: number[];
  p99: number[];
  nodes: { name: string; gaps: (number | null)[] }[];
  windowSeconds: number;
  sampleSeconds: number;
}

t.test('--console-history and --console-sample that make no sense: refused with their code before anything starts', async (t) => {
  const dir = workdir(t, 'con2-flags');
  for (const [flags, message] of [
    [['--console-sample', '0s'], /^MESHP_USAGE: --console-sample is at least 1s/],
    [['--console-history', '5s', '--console-sample', '10s'], /^MESHP_USAGE: --console-history is a duration at least as long as --console-sample/],
    [['--console-history', 'forever'], /^MESHP_USAGE: --console-history forever is not a duration/],
  ] as const) {
    const r = await meshpAsync('controller', 'serve', '--state', join(dir, 'ctl'), '--listen', '127.0.0.1:0', '--console-listen', '127.0.0.1:0', ...flags);
    t.equal(r.code, 2, `${flags.join(' ')}: a usage error`);
    t.match(r.err, message);
  }
  t.notOk(existsSync(join(dir, 'ctl', 'controller.db')), 'no store was made');
});

t.test('the chart survives a restart; a matrix over 200 nodes is not drawn, a filter is computed by the controller', async (t) => {
  const dir = workdir(t, 'con2-bounds');
  const state = join(dir, 'ctl');
  const flags = ['--console-listen', '127.0.0.1:0', '--console-history', '10m', '--console-sample', '1s'];
  let ctl = await startController(t, state, flags);
  const credentialText = readFileSync(join(state, ADMIN_CREDENTIAL_FILE), 'utf8').trim();
  const fingerprint = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE)).fingerprint;

  // 201 nodes, enrolled over real gRPC (no stream: each is a member, its gap its own): w000…w149 web, d000…d050 db.
  const names = [
    ...Array.from({ length: 150 }, (_, i) => `w${String(i).padStart(3, '0')}`),
    ...Array.from({ length: 51 }, (_, i) => `d${String(i).padStart(3, '0')}`),
  ];
  for (const name of names) {
    const a = new SimAgent(name, ctl.address, fingerprint);
    await a.enrol(await tokenFor(ctl, [name.startsWith('w') ? 'web' : 'db'], true));
    a.close();
  }
  await adminCalls(() => ctl).policy([{ from: 'web', to: 'db', ports: ['5432/tcp'] }]);

  let at = consoleOf(ctl);
  let { cookie } = await sessionOf(at, credentialText);
  const history = () => liveOnce<History>(at, cookie, '/api/live/history?network=default');
  let h = await history();
  t.match(h, { windowSeconds: 600, sampleSeconds: 1 }, 'the window and the interval the flags set');
  const deadline = Date.now() + 60_000;
  while ((h = await history()).at.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
  t.ok(h.at.length >= 3, `samples taken (${h.at.length})`);
  t.equal(h.nodes.length, names.length, 'of every node');

  // The restart: the chart's samples are read back from controller.db.
  ctl.proc.kill('SIGTERM');
  t.equal(await ctl.proc.exited, 0, 'the controller stopped');
  ctl = await startController(t, state, flags);
  at = consoleOf(ctl);
  ({ cookie } = await sessionOf(at, credentialText));
  const after = await history();
  t.same(after.at.slice(0, h.at.length), h.at, "the samples of the controller's run before the restart are still there");
  t.ok(after.at.length > h.at.length, 'and the new run samples on after them');
  t.same(
    after.nodes.map((n) => [n.name, n.gaps.slice(0, h.at.length)]),
    h.nodes.map((n) => [n.name, n.gaps]),
    "each node's gaps as they were",
  );

  const browser = await launchChromium(at);
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  const errors = consoleErrors(page);
  mkdirSync(SCREENS, { recursive: true });
  await page.goto(`${at.url}history.html`);
  await signInPage(page, credentialText, '#gaps tbody tr');
  const drawn = Number(/\((\d+) samples/.exec((await page.textContent('#history-window')) ?? '')?.[1] ?? 0);
  t.ok(drawn >= after.at.length, `the page draws the samples of both runs (${drawn})`);
  t.match(await page.textContent('#history-window'), /a sample every 1 s, kept for 10 minutes .*kept in the controller's store across restarts/);
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the convergence page after a restart');

  // The matrix: 201 nodes, over the bound: not drawn, and said.
  await page.goto(`${at.url}policy.html`);
  await page.locator('#matrix-text').filter({ hasText: 'not drawn' }).waitFor();
  t.equal(
    await page.textContent('#matrix-text'),
    '201 nodes, more than 200 on a side: the matrix is not drawn. Filter its rows or columns by a node or a tag.',
    'the page says why there is no matrix',
  );
  t.equal(await page.locator('#matrix tbody tr').count(), 0, 'no row drawn');
  t.ok(await page.locator('#matrix').isHidden(), 'the table is not shown');
  const unfiltered = await liveOnce<{ nodes: string[]; columns: string[]; matrix: string[][]; omittedOf: number }>(at, cookie, '/api/live/policy');
  t.match(unfiltered, { nodes: [], columns: [], matrix: [], omittedOf: 201 }, 'nothing of the matrix is sent to the browser');
  await page.screenshot({ path: join(SCREENS, 'policy-bounded.png'), fullPage: true });
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the policy page over the bound');

  // A filter: one node's rows, a tag's columns; computed by the controller, only those pairs sent.
  await page.fill('#reach-from', 'w007');
  await page.fill('#reach-to', 'db');
  await page.click('#matrix-filter button[type=submit]');
  await page.locator('#matrix tbody tr').first().waitFor();
  t.equal(await page.textContent('#matrix-text'), '1 × 51 nodes (rows w007, columns db).');
  const cells = await page.$$eval('#matrix tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('th, td')].map((c) => c.textContent ?? '')));
  const computed = await (await ctl.admin!()).call('getPolicy', { network: 'default', withReach: true, reachFrom: 'w007', reachTo: 'db', reachMax: 200 });
  t.same(
    cells,
    computed.reach.map((r) => [r.node, ...computed.reachColumns.map((c) => r.peers.find((p) => p.peer === c)?.ports.join(', ') || '-')]),
    "the page's matrix is the controller's, cell for cell",
  );
  t.same(cells, [['w007', ...Array.from({ length: 51 }, () => '5432/tcp')]], 'w007 (web) reaches every db node on 5432/tcp');
  const filtered = await liveOnce<{ nodes: string[]; columns: string[] }>(at, cookie, '/api/live/policy?from=w007&to=db');
  t.same([filtered.nodes.length, filtered.columns.length], [1, 51], 'the stream carries only the pairs the filter keeps');
  t.notOk(JSON.stringify(filtered).includes('w008'), 'no other web node is sent');
  await page.screenshot({ path: join(SCREENS, 'policy-filtered.png'), fullPage: true });
  t.same(await seriousViolations(page), [], 'axe-core: no serious violation on the filtered matrix');

  // A filter that still keeps too many (150 web nodes × 201): refused the same way.
  await page.fill('#reach-from', 'web');
  await page.fill('#reach-to', '');
  await page.click('#matrix-filter button[type=submit]');
  await page.locator('#matrix-text').filter({ hasText: 'not drawn' }).waitFor();
  t.equal(
    await page.textContent('#matrix-text'),
    '201 nodes (rows web), more than 200 on a side: the matrix is not drawn. Filter its rows or columns by a node or a tag.',
  );

  // Every page is made from the one layout: the same sign-in form and navigation, its own link marked; the parts are not served.
  for (const [path, current] of [
    ['/', 'fleet'],
    ['/node.html', null],
    ['/policy.html', 'policy'],
    ['/history.html', 'convergence'],
    ['/audit.html', 'audit'],
  ] as const) {
    const r = await https(at, 'GET', path);
    t.equal(r.status, 200, `${path} served`);
    t.equal(r.body.match(/<form id="signin-form">/g)?.length, 1, `${path}: one sign-in form`);
    t.equal(r.body.match(/<a [^>]*class="to-page"/g)?.length, 4, `${path}: the four links`);
    t.same(/<a [^>]*aria-current="page">([^<]*)</.exec(r.body)?.[1] ?? null, current, `${path}: its own link marked`);
  }
  for (const path of ['/layout.html', '/pages/node.html']) t.equal((await https(at, 'GET', path)).status, 404, `${path} is not served`);
  t.same(errors, [], 'no console errors');
});
