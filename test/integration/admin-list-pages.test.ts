// ListNodes a page at a time (issue 15: at 50,000 nodes the whole list, 9.7 MB, is over the 4 MB
// message limit and was refused MESHP_MESSAGE_TOO_LARGE). Against a real controller: pages in name
// order, each node once, the last page with no token; no page asked for is every node, as before;
// and `meshp node list` reads every page.
import t from 'tap';
import { join } from 'node:path';
import { meshpJson, startController, tokenFor, workdir } from '../helpers/grpc-procs.js';
import { RawAgent } from '../helpers/raw-agent.js';

t.test('listNodes pages', async (t) => {
  const dir = workdir(t, 'list-pages');
  const ctl = await startController(t, join(dir, 'ctl'));
  const names = ['n3', 'n1', 'n5', 'n2', 'n4'];
  for (const name of names) {
    const raw = new RawAgent(ctl);
    t.teardown(() => raw.link.close());
    await raw.enrol(await tokenFor(ctl), name);
  }
  const admin = await ctl.admin!();
  const pages: string[][] = [];
  let pageToken = '';
  do {
    const r = await admin.call('listNodes', { network: 'default', pageSize: 2, pageToken });
    t.ok(r.nodes.length <= 2, 'a page holds at most the size asked for');
    pages.push(r.nodes.map((n) => n.name));
    pageToken = r.nextPageToken;
  } while (pageToken && pages.length < 10);
  t.same(pages, [['n1', 'n2'], ['n3', 'n4'], ['n5']], 'pages in name order, each node once, the last without a token');

  const all = await admin.call('listNodes', { network: 'default' });
  t.same(
    all.nodes.map((n) => n.name),
    ['n1', 'n2', 'n3', 'n4', 'n5'],
    'no page asked for: every node in one answer',
  );
  t.equal(all.nextPageToken, '', 'and no token');

  const after = await admin.call('listNodes', { network: 'default', pageSize: 10, pageToken: 'n4' });
  t.same(
    after.nodes.map((n) => n.name),
    ['n5'],
    'a token is where the page starts after',
  );

  const cli = meshpJson<{ nodes: { name: string }[] }>('node', 'list', '--state', ctl.state);
  t.same(
    cli.nodes.map((n) => n.name),
    ['n1', 'n2', 'n3', 'n4', 'n5'],
    'meshp node list reads every page',
  );
});
