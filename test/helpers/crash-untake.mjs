// Fault injection for the untake crash test (issue 29): the real host, SQLite store and file store, and a
// SIGKILL of this very process at the N-th boundary of a machine- or record-changing call of an untake.
// usage: node crash-untake.mjs ROOT STATE DECLARATION MODULE KILL_AT [PREVIEW_ID]   (KILL_AT 0: never; prints the count)
// With PREVIEW_ID, the untake runs as the agent runs one the controller asked (core/src/agent/untake.ts).
import { readFileSync } from 'node:fs';
import { PLUGIN_API_VERSION } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { untake } from '@meshp/core/reconcile';
import { untakesAsked } from '@meshp/core/agent';
import { declarationFromWire, declarationToWire } from '@meshp/core/delta';
import { LocalFileStore } from '@meshp/files-local';
import { SqliteHostStore } from '@meshp/state-sqlite';

const [root, stateDir, declFile, module, killAtArg, previewId] = process.argv.slice(2);
const killAt = Number(killAtArg);
let count = 0;
function tick() {
  count += 1;
  if (count === killAt) process.kill(process.pid, 'SIGKILL');
}
function wrap(obj, methods) {
  for (const m of methods) {
    const original = obj[m].bind(obj);
    obj[m] = async (...args) => {
      tick();
      const result = await original(...args);
      tick();
      return result;
    };
  }
  return obj;
}
const plugin = {
  name: 'crash-points',
  apiVersion: PLUGIN_API_VERSION,
  apply(host) {
    host.hooks.files.tapPromise('crash-points', async (o) => wrap(new LocalFileStore(o.root), ['write', 'remove']));
    host.hooks.state.tapPromise('crash-points', async (o) =>
      wrap(new SqliteHostStore(o.stateDir), ['refound', 'forgetOwned', 'setValue', 'recordOwned', 'noteSeen', 'saveReport', 'recordIntent']),
    );
  },
};
const host = new Host({ root, stateDir }).use(plugin);
const decl = JSON.parse(readFileSync(declFile, 'utf8'));
if (previewId) {
  // The declaration as the controller sends an untake: the module not taken, the preview id beside it.
  const asked = { ...decl, modules: decl.modules.map((m) => (m.name === module ? { ...m, taken: false } : m)) };
  const wire = { ...declarationToWire(asked), untakes: [{ module, previewId }] };
  const { outcomes } = await untakesAsked(host, declarationFromWire(wire), wire);
  await host.close();
  process.stdout.write(JSON.stringify({ points: count, outcomes }));
} else {
  const result = await untake(host, decl, module);
  await host.close();
  process.stdout.write(JSON.stringify({ points: count, steps: result.plan.steps.length }));
}
