/**
 * The resolver comes up when it can, not only when the view changes: a bind that fails (here the
 * port is held by another socket; in the lab, the mesh address not up yet under load) is asked for
 * again at the next `settled()` — where the agent waits before each reconcile — with one warning per
 * cause, and answers once the port is free. Real sockets on loopback, a real controller's delta.
 */
import t from 'tap';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeltaApplier } from '@meshp/core/delta';
import { Host } from '@meshp/core/host';
import { Controller, MemoryStore } from '@meshp/controller';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import { StateDelta } from '@meshp/protocol';

t.test('a bind refused at attach is retried before the next reconcile, and said once', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'meshp-dns-retry-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  // Another program holds the port first.
  const squatter = createSocket('udp4');
  await new Promise<void>((resolve) => squatter.bind(0, '127.0.0.1', resolve));
  const port = squatter.address().port;
  let squatting = true;
  t.teardown(() => {
    if (squatting) squatter.close();
  });

  const c = new Controller(new MemoryStore());
  c.createNetwork('lab');
  c.join('lab', { id: 'a', nodeKey: 'ka', tags: ['a'] });
  const applier = new DeltaApplier();
  t.equal(applier.receive(StateDelta.fromPartial(c.deltaFor('lab', 'a') as never)).status, 'applied');

  const warned: string[] = [];
  const answering: unknown[] = [];
  const log = { warn: (f: Record<string, unknown>) => warned.push(String(f.err)), info: (f: Record<string, unknown>) => answering.push(f) };
  const plugin = new DnsResolverPlugin({ root, listenAddress: '127.0.0.1', port, log });
  new Host({ stateDir: root, root }).use(plugin);
  t.teardown(() => plugin.close());

  await plugin.attach(applier.view);
  t.match(plugin.status().lastError, /EADDRINUSE/, 'the port is taken: not answering, and why');
  t.equal(plugin.status().port, 0);
  await plugin.settled();
  await plugin.settled();
  t.match(plugin.status().lastError, /EADDRINUSE/, 'still taken: each wait tries again');
  t.equal(warned.length, 1, 'the same cause is warned of once, not at every retry');
  t.equal(answering.length, 0);

  squatter.close();
  squatting = false;
  await plugin.settled();
  t.equal(plugin.status().lastError, null, 'the port freed: the next wait binds it, with no change of view');
  t.equal(plugin.status().port, port);
  t.equal(answering.length, 1, 'and says it answers');
  await plugin.settled();
  t.equal(answering.length, 1, 'once listening, a wait binds nothing again');
});
