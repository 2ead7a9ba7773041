/**
 * A refusal's code follows from its condition, not from the site that raises it: the factories of
 * @meshp/core/util give each condition its one code, and the sites that had another code for the
 * same condition give it now (a size limit is MESHP_INPUT_TOO_LARGE, an empty sync message is
 * MESHP_MESSAGE_MALFORMED both ways, several tunnel keys and no record is MESHP_TUNNEL_MISMATCH at
 * leave as at start). MESHP_USAGE, the CLI's exit 2, stays for a command used wrongly.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { CODES, MeshpError } from '@meshp/core';
import * as areas from '../../core/src/codes.js';
import { inputTooLarge, malformed, nameTaken, notFound, providerMissing, tokenInvalid, usage } from '@meshp/core/util';
import { pluginSpecs, readPluginConfig } from '../../bin/src/plugins/load.js';
import { leavingInterface } from '../../bin/src/remote/leave.js';
import { agentFromWire, controllerFromWire } from '../../plugins/transport-grpc/src/codec.js';
import { Controller, MemoryStore } from '@meshp/controller';
import { MESHP } from '../helpers/grpc-procs.js';

t.test('each factory gives its condition its code and the text its sites wrote', async (t) => {
  const made: [MeshpError, string, string][] = [
    [usage('--ttl 5x is not a duration'), 'MESHP_USAGE', '--ttl 5x is not a duration'],
    [notFound('node', 'web1', 'default'), 'MESHP_NOT_FOUND', 'no node web1 in default'],
    [notFound('network', 'prod'), 'MESHP_NOT_FOUND', 'no network prod'],
    [
      notFound('module', 'db', 'the catalogue of n', 'add it with meshp catalogue add'),
      'MESHP_NOT_FOUND',
      'no module db in the catalogue of n: add it with meshp catalogue add',
    ],
    [nameTaken('web1', 'default'), 'MESHP_NAME_TAKEN', 'node web1 is already in default'],
    [
      nameTaken('web1', 'default', 'start this agent again with --name web1-2'),
      'MESHP_NAME_TAKEN',
      'node web1 is already in default; start this agent again with --name web1-2',
    ],
    [tokenInvalid('the enrolment token is not a meshp1 token'), 'MESHP_TOKEN_INVALID', 'the enrolment token is not a meshp1 token'],
    [malformed('an empty message on the Sync stream'), 'MESHP_MESSAGE_MALFORMED', 'an empty message on the Sync stream'],
    [inputTooLarge('at most 64 plugins may be loaded'), 'MESHP_INPUT_TOO_LARGE', 'at most 64 plugins may be loaded'],
    [providerMissing('a file store'), 'MESHP_PROVIDER_MISSING', 'no plugin provides a file store'],
  ];
  for (const [e, code, message] of made) {
    t.ok(e instanceof MeshpError, `${code} is a MeshpError`);
    t.ok(Object.hasOwn(CODES, code), `${code} is in CODES`);
    t.same([e.code, e.message], [code, message]);
  }
  const cause = new Error('EACCES');
  t.equal(usage('x is not readable', { cause }).cause, cause, 'the cause is kept');
});

t.test('CODES is one flat map of every code with its meaning', async (t) => {
  const codes = Object.keys(CODES);
  const grouped = Object.entries(areas)
    .filter(([name]) => name.endsWith('_CODES') && name !== 'CODES')
    .flatMap(([, group]) => Object.keys(group as object));
  t.same([...grouped].sort(), [...codes].sort(), 'every code is in exactly one area group, and CODES holds them all');
  t.equal(new Set(grouped).size, grouped.length, 'no code in two groups');
  for (const c of codes) {
    t.match(c, /^MESHP_[A-Z_]+$/);
    t.ok(typeof CODES[c as keyof typeof CODES] === 'string' && CODES[c as keyof typeof CODES].length > 0, `${c} says what it means`);
  }
});

t.test('an empty message on the Sync stream is malformed, from either side', async (t) => {
  t.throws(() => agentFromWire({}), { code: 'MESHP_MESSAGE_MALFORMED', message: 'an empty message on the Sync stream' }, 'from an agent');
  t.throws(() => controllerFromWire({}), { code: 'MESHP_MESSAGE_MALFORMED', message: 'an empty message on the Sync stream' }, 'from the controller');
});

t.test('an input over a size or count limit is MESHP_INPUT_TOO_LARGE, not a usage error', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-codes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const big = join(dir, 'agent.json');
  writeFileSync(big, JSON.stringify({ plugins: [], pad: 'x'.repeat(256 * 1024) }));
  t.throws(() => readPluginConfig(big), { code: 'MESHP_INPUT_TOO_LARGE', message: /is over 262144 bytes/ }, 'a config file over its size');
  const many = Array.from({ length: 65 }, (_, i) => `./p${i}.js`);
  t.throws(() => pluginSpecs({ plugin: many }), { code: 'MESHP_INPUT_TOO_LARGE', message: /at most 64 plugins/ }, 'more plugins than may be loaded');
  t.equal(pluginSpecs({ plugin: many.slice(0, 64) }).length, 64, '64 are loaded');
});

t.test('several tunnel keys and no record: the same MESHP_TUNNEL_MISMATCH at leave as at start, exit 1', async (t) => {
  const state = mkdtempSync(join(tmpdir(), 'meshp-codes-'));
  t.teardown(() => rmSync(state, { recursive: true, force: true }));
  mkdirSync(join(state, 'wireguard'));
  t.equal(leavingInterface(state), null, 'no key: no tunnel to take down');
  writeFileSync(join(state, 'wireguard', 'wg0.key'), 'k\n');
  t.equal(leavingInterface(state), 'wg0', 'one key: its interface');
  writeFileSync(join(state, 'wireguard', 'wg1.key'), 'k\n');
  t.throws(() => leavingInterface(state), {
    code: 'MESHP_TUNNEL_MISMATCH',
    message: /holds the keys of several tunnels \(.*\): name the one to take down with --tunnel-interface/,
  });
  t.equal(leavingInterface(state, 'wg1'), 'wg1', 'the one named');
  const r = spawnSync(process.execPath, [MESHP, 'agent', 'leave', '--state', state, '--yes'], { encoding: 'utf8' });
  t.equal(r.status, 1, 'a refusal, not a usage error');
  t.match(r.stderr, /^MESHP_TUNNEL_MISMATCH: .*holds the keys of several tunnels/);
  const absent = spawnSync(process.execPath, [MESHP, 'agent', 'leave', '--state', join(state, 'nowhere'), '--yes'], { encoding: 'utf8' });
  t.equal(absent.status, 2, 'a --state that names nothing is still a usage error');
  t.match(absent.stderr, /^MESHP_USAGE: --state .* does not exist/);
});

t.test("the controller's own sites: a name taken at join and at rename is one code, a token that is not one is MESHP_TOKEN_INVALID", async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.join('n', { id: 'x', nodeKey: 'kx', tags: [] });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: [] });
  t.throws(() => c.join('n', { id: 'x', nodeKey: 'k2', tags: [] }), { code: 'MESHP_NAME_TAKEN', message: 'node x is already in n' }, 'join');
  t.throws(() => c.renameNode('n', 'y', 'x'), { code: 'MESHP_NAME_TAKEN', message: 'node x is already in n' }, 'rename');
  t.throws(() => c.enrol('not-a-token', { id: 'v', nodeKey: 'kv' }), { code: 'MESHP_TOKEN_INVALID', message: 'the token is unknown or expired' }, 'enrol');
  t.throws(() => c.join('nope', { id: 'z', nodeKey: 'kz', tags: [] }), { code: 'MESHP_NOT_FOUND', message: 'no network nope' }, 'no such network');
});

t.test('a state folder with no host state is MESHP_NOT_FOUND, not a damaged store (the operator is not sent to a backup)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-nostate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const args of [
    ['host', 'status', '--state', dir],
    ['doctor', '--local', '--state', dir],
  ]) {
    const r = spawnSync(process.execPath, [MESHP, ...args], { encoding: 'utf8' });
    t.equal(r.status, 1, `${args.join(' ')}: refused`);
    t.match(r.stderr, /^MESHP_NOT_FOUND: no host state in /, `${args.join(' ')}: says there is none`);
  }
});
