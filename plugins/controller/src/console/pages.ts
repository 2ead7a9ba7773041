/**
 * The console's pages, each made once at start from one layout (console/layout.html: the head, the
 * sign-in form, the navigation) and the page's own part (console/pages/NAME.html: what it shows once
 * signed in), so the markup every page shares is written once. Only fixed text of the package goes
 * in: nothing of a request, a session or the controller's state (the page's script fetches those).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface PageDef {
  /** Served at /FILE (and the fleet at / too). */
  file: string;
  /** body[data-page]: what console.js does there. */
  page: string;
  title: string;
  /** Scripts and styles of its own, before the console's. */
  head?: string;
  /** More of the navigation, after the links (the fleet's network choice). */
  nav?: string;
}

export const PAGES: readonly PageDef[] = [
  { file: 'index.html', page: 'fleet', title: 'fleet', nav: '<label for="network">network</label>\n<select id="network"></select>' },
  { file: 'node.html', page: 'node', title: 'node' },
  { file: 'policy.html', page: 'policy', title: 'policy' },
  {
    file: 'history.html',
    page: 'history',
    title: 'convergence',
    head: '<link rel="stylesheet" href="/vendor/uplot/uPlot.min.css" />\n<script src="/vendor/uplot/uPlot.iife.min.js" defer></script>',
  },
  { file: 'audit.html', page: 'audit', title: 'audit' },
];

/** The navigation's links; the fleet's is #back (the node page's way back keeps its network). */
const LINKS: readonly [to: string, label: string, page: string][] = [
  ['/', 'fleet', 'fleet'],
  ['/policy.html', 'policy', 'policy'],
  ['/history.html', 'convergence', 'history'],
  ['/audit.html', 'audit', 'audit'],
];

const indent = (text: string, spaces: number) =>
  text
    .split('\n')
    .map((l) => (l ? ' '.repeat(spaces) + l : l))
    .join('\n')
    .trimStart();

function nav(page: string, extra: string | undefined): string {
  const links = LINKS.map(
    ([to, label, p]) =>
      `<a href="${to}" class="to-page" data-to="${to}"${to === '/' ? ' id="back"' : ''}${p === page ? ' aria-current="page"' : ''}>${label}</a>`,
  );
  return indent([...links, ...(extra ? [extra] : [])].join('\n'), 8);
}

/** Every page's HTML by the path it is served at. */
export function renderPages(dir: string): Map<string, string> {
  const layout = readFileSync(join(dir, 'layout.html'), 'utf8');
  const out = new Map<string, string>();
  for (const p of PAGES) {
    const app = readFileSync(join(dir, 'pages', p.file), 'utf8').trimEnd();
    const slots: Record<string, string> = {
      title: p.title,
      page: p.page,
      head: indent(p.head ?? '', 4),
      nav: nav(p.page, p.nav),
      app: `\n${' '.repeat(8)}${indent(app, 8)}\n${' '.repeat(6)}`,
    };
    // One pass over the layout's own slots: a page's text is never read for slots again.
    const html = layout.replace(/\{\{(\w+)\}\}/g, (_m, name: string) => slots[name] ?? '').replace(/^\s*\n/gm, '');
    out.set(`/${p.file}`, html);
    if (p.file === 'index.html') out.set('/', html);
  }
  return out;
}
