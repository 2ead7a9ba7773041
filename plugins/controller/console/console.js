// The console's one script: sign-in, sign-out, and the live pages (server-sent events). It holds no
// secret: the session is an HttpOnly cookie it cannot read, and the CSRF token it sends with each
// action is fetched from /api/session after sign-in and kept in memory only. Every text is set with
// textContent, never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const page = document.body.dataset.page;
const params = new URLSearchParams(location.search);
let csrf = '';
/** Whether the session may change anything (/api/session's mayChange): no action is offered otherwise. */
let mayChange = false;
let live = null;

function cell(tr, text, className) {
  const td = document.createElement('td');
  td.textContent = String(text);
  if (className) td.className = className;
  tr.appendChild(td);
  return td;
}

function show(signedIn) {
  $('signin').hidden = signedIn;
  $('app').hidden = !signedIn;
  $('session').hidden = !signedIn;
  if (!signedIn && live) {
    live.close();
    live = null;
  }
}

function signedOut() {
  csrf = '';
  show(false);
  $('credential').focus();
}

async function refusalOf(r) {
  try {
    const body = await r.json();
    return `${body.code}: ${body.message}`;
  } catch {
    return `HTTP ${r.status}`;
  }
}

async function signIn(event) {
  event.preventDefault();
  const input = $('credential');
  const r = await fetch('/api/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ credential: input.value }),
  });
  input.value = '';
  if (!r.ok) {
    $('signin-error').textContent = await refusalOf(r);
    return;
  }
  $('signin-error').textContent = '';
  const answer = await r.json();
  csrf = answer.csrf;
  mayChange = answer.mayChange === true;
  start();
}

async function signOut() {
  await fetch('/api/signout', { method: 'POST', headers: { 'csrf-token': csrf } });
  signedOut();
}

const MODE_CLASS = { adopted: 'mode-adopted' };
const matches = (n, q) => !q || [n.name, n.mode, n.status, n.firewall, ...n.tags].some((x) => String(x).toLowerCase().includes(q));

let lastFleet = null;

/** The mode its agent reports; the one asked beside it while they differ (as `node list` does in its NOTE). */
function modeShown(n) {
  if (n.requestedMode === n.mode || n.mode === 'unknown') return n.mode;
  return `${n.mode} (${n.requestedMode} asked${n.transition === 'refused' ? ', refused' : ''})`;
}

function renderFleet(f) {
  lastFleet = f;
  if (f.error) {
    $('live-error').textContent = f.error;
    return;
  }
  $('live-error').textContent = '';
  $('fleet-network').textContent = f.network;
  const p = f.progress;
  $('progress-text').textContent = `${p.converged} of ${p.total} nodes converged, ${p.adopted} adopted${p.unknown ? `, ${p.unknown} not reported yet` : ''}`;
  $('progress').max = Math.max(1, p.total);
  $('progress').value = p.converged;
  const select = $('network');
  if (select.options.length !== f.networks.length) {
    select.replaceChildren(...f.networks.map((n) => new Option(n, n, false, n === f.network)));
  }
  const q = $('filter').value.trim().toLowerCase();
  const body = $('fleet').tBodies[0];
  body.replaceChildren();
  for (const n of f.nodes.filter((x) => matches(x, q))) {
    const tr = document.createElement('tr');
    tr.dataset.node = n.name;
    const a = document.createElement('a');
    a.href = `/node.html?${new URLSearchParams({ network: f.network, node: n.name })}`;
    a.textContent = n.name;
    cell(tr, '').appendChild(a);
    cell(tr, modeShown(n), MODE_CLASS[n.mode]).dataset.col = 'mode';
    cell(tr, n.status, n.status === 'ok' ? '' : 'status-bad').title = n.statusDetail;
    cell(tr, n.appliedVersion, 'num');
    cell(tr, n.stateVersion, 'num');
    cell(tr, n.gap, 'num');
    cell(tr, n.lastContact);
    cell(tr, n.firewall || '-');
    cell(tr, n.held, 'num');
    cell(tr, n.changed, 'num');
    cell(tr, n.refused, 'num');
    cell(tr, n.tags.join(', '));
    body.appendChild(tr);
  }
}

function fact(dl, name, value) {
  const dt = document.createElement('dt');
  dt.textContent = name;
  const dd = document.createElement('dd');
  dd.textContent = String(value);
  dl.append(dt, dd);
}

function rows(table, list, fn) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const x of list) {
    const tr = document.createElement('tr');
    fn(tr, x);
    body.appendChild(tr);
  }
}

function renderPreview(v) {
  const p = v.preview;
  $('preview-text').textContent = p
    ? `preview ${p.id}: ${p.closes ? `${p.closes} door${p.closes === 1 ? '' : 's'} WILL CLOSE` : 'nothing reachable closes'}`
    : `no preview: ${v.previewError}`;
  const head = $('preview').tHead.rows[0];
  head.replaceChildren(
    ...(p ? p.columns : []).map((c) => {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = c;
      return th;
    }),
  );
  rows($('preview'), p ? p.rows : [], (tr, r) => r.forEach((c, i) => cell(tr, c, i === r.length - 1 && c.startsWith('WILL CLOSE') ? 'closes' : '')));
  $('preview-steps').replaceChildren(
    ...(p ? p.steps : []).map((s) => {
      const li = document.createElement('li');
      li.textContent = s;
      return li;
    }),
  );
}

let pending = null;
let actionsShown = '';

/** What the action would do, in the CLI's words, then the question. */
async function ask(a) {
  const r = await fetch(`/api/would?${new URLSearchParams(a)}`);
  if (!r.ok) {
    $('action-result').textContent = await refusalOf(r);
    return;
  }
  const w = await r.json();
  if (a.verb === 'converge' && !w.previewId) {
    $('action-result').textContent = w.would;
    return;
  }
  pending = a;
  $('confirm-text').textContent = `${w.would}?`;
  $('confirm').showModal();
}

async function confirmed() {
  $('confirm').close();
  const a = pending;
  pending = null;
  if (!a) return;
  const r = await fetch('/api/act', { method: 'POST', headers: { 'content-type': 'application/json', 'csrf-token': csrf }, body: JSON.stringify(a) });
  $('action-result').textContent = r.ok
    ? `${a.verb}${a.module ? ` ${a.module}` : ''} asked of ${a.node}: the page follows what its agent reports`
    : await refusalOf(r);
}

function button(label, a) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.addEventListener('click', () => void ask(a));
  return b;
}

/** The actions a CLI user has on this node, each a button; drawn again only when they change. */
function renderActions(v) {
  const n = v.node;
  const base = { network: v.network, node: n.name };
  const list = [];
  if (!mayChange) {
    $('actions').replaceChildren('This session may read, not change: no action is offered.');
    return;
  }
  for (const m of n.assigned) {
    if (!n.taken.includes(m)) list.push([`Take ${m}`, { ...base, verb: 'take', module: m }]);
    list.push([`Unassign ${m}`, { ...base, verb: 'unassign', module: m }]);
  }
  for (const m of v.catalogue.filter((x) => !n.assigned.includes(x))) list.push([`Assign ${m}`, { ...base, verb: 'assign', module: m }]);
  if (v.preview && n.mode === 'adopted') list.push([`Converge to preview ${v.preview.id}`, { ...base, verb: 'converge', previewId: v.preview.id }]);
  if (n.mode === 'converged' || n.requestedMode === 'converged') list.push(['Return to adopted', { ...base, verb: 'adopt' }]);
  const shown = JSON.stringify(list);
  if (shown === actionsShown) return;
  actionsShown = shown;
  $('actions').replaceChildren(...list.map(([label, a]) => button(label, a)));
}

function renderNode(v) {
  if (v.error) {
    $('live-error').textContent = v.error;
    return;
  }
  $('live-error').textContent = '';
  const n = v.node;
  $('node-name').textContent = n.name;
  const dl = $('node-facts');
  dl.replaceChildren();
  fact(dl, 'mode', n.mode);
  fact(dl, 'mode asked', `${n.requestedMode} (${n.transition})`);
  fact(dl, 'status', `${n.status}${n.statusDetail ? `: ${n.statusDetail}` : ''}`);
  fact(dl, 'versions', `applied ${n.appliedVersion}, state ${n.stateVersion}, gap ${n.gap}`);
  fact(dl, 'last seen', n.lastContact);
  fact(dl, 'firewall', v.firewall ? `${v.firewall.kind}${v.firewall.active ? ' (active)' : ''}` : 'not reported yet');
  fact(dl, 'modules assigned', n.assigned.join(', ') || '-');
  fact(dl, 'modules taken', n.taken.join(', ') || '-');
  fact(dl, 'held / changed / refused', `${n.held} / ${n.changed} / ${n.refused}`);
  rows($('resources'), v.resources, (tr, x) => [x.key, x.kind, x.module || '-', x.state, x.reason].forEach((c) => cell(tr, c)));
  rows($('deltas'), v.recentDeltas, (tr, d) =>
    [
      d.fromVersion === 0 ? 'snapshot' : d.fromVersion,
      d.toVersion,
      d.upserts,
      d.removals,
      d.components.join(', ') || '-',
      d.at,
      d.acked ? 'acked' : 'not yet',
    ].forEach((c) => cell(tr, c)),
  );
  renderPreview(v);
  renderActions(v);
}

function th(text, scope) {
  const h = document.createElement('th');
  h.scope = scope;
  h.textContent = text;
  return h;
}

function renderPolicy(v) {
  if (v.error) {
    $('live-error').textContent = v.error;
    return;
  }
  $('live-error').textContent = '';
  $('policy-network').textContent = v.network;
  $('policy-version').textContent = v.policyVersion
    ? `in force since state version ${v.policyVersion} (the network is at ${v.stateVersion})`
    : `no policy set: no node reaches another but the control-node (state version ${v.stateVersion})`;
  rows($('rules'), v.rules, (tr, r) => [r.from, r.to, r.ports.join(', ') || '*'].forEach((c) => cell(tr, c)));
  rows($('policy-tests'), v.tests, (tr, x) => [x.from, x.to, x.port, x.expect].forEach((c) => cell(tr, c)));
  const filtered = [v.from && `rows ${v.from}`, v.to && `columns ${v.to}`].filter(Boolean).join(', ');
  // Over the bound on a side the controller computes none of it: the page asks for a filter instead.
  $('matrix-text').textContent = v.omittedOf
    ? `${v.omittedOf} nodes${filtered ? ` (${filtered})` : ''}, more than ${v.max} on a side: the matrix is not drawn. Filter its rows or columns by a node or a tag.`
    : `${v.nodes.length} × ${v.columns.length} nodes${filtered ? ` (${filtered})` : ''}.`;
  $('matrix').hidden = v.omittedOf > 0;
  $('matrix').tHead.rows[0].replaceChildren(...(v.omittedOf ? [] : [th('from \\ to', 'col')]), ...v.columns.map((n) => th(n, 'col')));
  rows($('matrix'), v.nodes, (tr, n) => {
    tr.dataset.node = n;
    tr.appendChild(th(n, 'row'));
    v.matrix[v.nodes.indexOf(n)].forEach((c, j) => {
      const td = cell(tr, v.columns[j] === n ? '' : c || '-', c ? 'reach' : 'noreach');
      td.dataset.to = v.columns[j];
    });
  });
}

const COLORS = ['#1f5fa8', '#2e7d32', '#7a4100', '#6a1b9a', '#00695c', '#455a64'];
let chart = null;

/** The chart (uPlot, served by the console): the fleet's p99 gap and each node's, drawn again only when the nodes change. */
function renderHistory(h) {
  if (h.error) {
    $('live-error').textContent = h.error;
    return;
  }
  $('live-error').textContent = '';
  $('history-network').textContent = h.network;
  $('history-window').textContent =
    `The gaps the controller saw, a sample every ${h.sampleSeconds} s, kept for ${Math.round(h.windowSeconds / 60)} minutes (${h.at.length} samples so far, kept in the controller's store across restarts).`;
  const data = [h.at, h.p99, ...h.nodes.map((n) => n.gaps)];
  const series = [
    {},
    { label: 'fleet p99 gap', stroke: '#a00000', width: 3 },
    ...h.nodes.map((n, i) => ({ label: n.name, stroke: COLORS[i % COLORS.length], width: 1 })),
  ];
  const key = JSON.stringify(series.map((x) => x.label));
  if (!chart || chart.key !== key) {
    if (chart) chart.destroy();
    const opts = {
      width: Math.min(900, document.body.clientWidth - 40),
      height: 300,
      series,
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [{}, { label: 'gap (versions)', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000] }],
    };
    chart = new window.uPlot(opts, data, $('chart'));
    chart.key = key;
  } else {
    chart.setData(data);
  }
  $('history-now').textContent = `fleet p99 gap now: ${h.p99.at(-1) ?? 0}; worst in the window: ${Math.max(0, ...h.p99)}`;
  rows($('gaps'), h.nodes, (tr, n) => {
    tr.dataset.node = n.name;
    cell(tr, n.name);
    cell(tr, n.gaps.at(-1) ?? '-', 'num');
    cell(tr, Math.max(0, ...n.gaps.filter((g) => g !== null)), 'num');
  });
}

function renderAudit(v) {
  if (v.error) {
    $('live-error').textContent = v.error;
    return;
  }
  $('live-error').textContent = '';
  $('audit-network').textContent = v.network;
  rows($('audit'), v.entries, (tr, e) => [e.at, e.actor, e.method, e.node || '-', e.stateVersion, e.summary].forEach((c) => cell(tr, c)));
}

function follow(path, event, render) {
  if (live) live.close();
  live = new EventSource(path);
  live.addEventListener(event, (e) => render(JSON.parse(e.data)));
  live.addEventListener('signedout', signedOut);
}

function start() {
  show(true);
  const network = params.get('network') || 'default';
  for (const a of document.querySelectorAll('a.to-page')) a.href = `${a.dataset.to}?${new URLSearchParams({ network })}`;
  if (page === 'fleet') {
    follow(`/api/live/fleet?${new URLSearchParams({ network })}`, 'fleet', renderFleet);
  } else if (page === 'policy') {
    $('reach-from').value = params.get('from') || '';
    $('reach-to').value = params.get('to') || '';
    follow(`/api/live/policy?${new URLSearchParams({ network, from: $('reach-from').value, to: $('reach-to').value })}`, 'policy', renderPolicy);
  } else if (page === 'history') {
    follow(`/api/live/history?${new URLSearchParams({ network })}`, 'history', renderHistory);
  } else if (page === 'audit') {
    $('audit-node').value = params.get('node') || '';
    follow(`/api/live/audit?${new URLSearchParams({ network, node: $('audit-node').value })}`, 'audit', renderAudit);
  } else {
    const q = new URLSearchParams({ network: params.get('network') || 'default', node: params.get('node') || '' });
    $('back').href = `/?${new URLSearchParams({ network: q.get('network') })}`;
    follow(`/api/live/node?${q}`, 'node', renderNode);
  }
}

async function boot() {
  $('signin-form').addEventListener('submit', (e) => void signIn(e));
  $('signout').addEventListener('click', () => void signOut());
  if (page === 'node') {
    $('confirm-yes').addEventListener('click', () => void confirmed());
    $('confirm-no').addEventListener('click', () => {
      pending = null;
      $('confirm').close();
    });
  }
  if (page === 'audit') {
    $('audit-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      params.set('node', $('audit-node').value.trim());
      window.history.replaceState(null, '', `?${params}`);
      start();
    });
  }
  if (page === 'policy') {
    $('matrix-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      params.set('from', $('reach-from').value.trim());
      params.set('to', $('reach-to').value.trim());
      window.history.replaceState(null, '', `?${params}`);
      start();
    });
  }
  if (page === 'fleet') {
    $('filter').addEventListener('input', () => lastFleet && renderFleet(lastFleet));
    $('network').addEventListener('change', (e) => location.assign(`/?${new URLSearchParams({ network: e.target.value })}`));
  }
  const r = await fetch('/api/session');
  const s = r.ok ? await r.json() : { signedIn: false };
  if (!s.signedIn) return signedOut();
  csrf = s.csrf;
  mayChange = s.mayChange === true;
  start();
}

void boot();
