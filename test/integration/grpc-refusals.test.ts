/**
 * What the controller refuses, each with a coded error the caller reads and a line in its log:
 * forged, altered, replayed and expired tokens; a wrong fingerprint; a node asking for another's
 * state; a credential without its key; an oversized message; a wrong admin credential.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMeshpError, type ControlLink, type TransportError } from '@meshp/core';
import { challengePayload, decodeToken, encodeToken } from '@meshp/core/agent';
import { GrpcControlLink } from '@meshp/transport-grpc';
import { meshpAsync, startAgent, startController, tokenFor, workdir, type ControllerProc } from '../helpers/grpc-procs.js';

function keyPair() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), sign: (p: Uint8Array) => sign(null, p, privateKey) };
}

async function refusedAgent(t: Subtest, ctl: ControllerProc, dir: string, name: string, token: string): Promise<string> {
  const a = startAgent(t, dir, name, ctl.address, token);
  t.equal(await a.proc.exited, 1, `${name} exits 1`);
  return a.proc.stderr.trim();
}

/** Opens a Sync stream, answers the challenge with `hello`, and resolves with how the stream ended. */
function syncAs(
  link: ControlLink,
  hello: (nonce: Uint8Array) => Parameters<ReturnType<ControlLink['sync']>['send']>[0],
  after?: (send: (m: Parameters<ReturnType<ControlLink['sync']>['send']>[0]) => void) => void,
) {
  return new Promise<{ error?: TransportError; messages: string[] }>((resolve) => {
    const ch = link.sync();
    const messages: string[] = [];
    ch.onMessage((m) => {
      messages.push(Object.keys(m)[0]!);
      if ('challenge' in m) {
        ch.send(hello(m.challenge));
        after?.((x) => ch.send(x));
      }
    });
    ch.onClose((error) => resolve({ error, messages }));
  });
}

t.test('the controller refuses what it must, with a code, and logs it', async (t) => {
  const dir = workdir(t, 'refusals');
  const ctl = await startController(t, join(dir, 'ctl'));
  const logged = (code: string) => ctl.proc.waitFor((l) => l.code === code, 5_000);
  // Tokens are made over the in-process Admin client (the controller's refusals are under test, not
  // `meshp token create`); the CLI runs below stay where its own output and exit code are asserted.

  t.equal(statSync(join(ctl.state, 'admin.credential')).mode & 0o777, 0o600, 'the admin credential is 0600');
  t.equal(statSync(join(ctl.state, 'tls/controller.key')).mode & 0o777, 0o600, 'the TLS key is 0600');

  // A good enrolment, to have someone to impersonate.
  const good = startAgent(t, dir, 'b1', ctl.address, await tokenFor(ctl));
  await good.proc.waitFor((l) => l.msg === 'applied');
  t.equal(statSync(join(good.state, 'node.key')).mode & 0o777, 0o600, "the node's private key is 0600");

  const real = decodeToken(await tokenFor(ctl));
  const forged = encodeToken(real.claims, 'A'.repeat(43));
  t.match(await refusedAgent(t, ctl, dir, 'f1', forged), /^MESHP_TOKEN_INVALID: .*unknown/, 'a forged token');
  await logged('MESHP_TOKEN_INVALID');

  const altered = encodeToken({ ...real.claims, adopted: !real.claims.adopted }, real.secret);
  t.match(await refusedAgent(t, ctl, dir, 'f2', altered), /^MESHP_TOKEN_INVALID: .*altered/, 'a token whose claims were changed');

  const once = await tokenFor(ctl);
  const first = startAgent(t, dir, 'r1', ctl.address, once);
  await first.proc.waitFor((l) => l.msg === 'enrolled');
  t.match(await refusedAgent(t, ctl, dir, 'r2', once), /^MESHP_TOKEN_INVALID: .*already used/, 'a replayed token');

  const short = await tokenFor(ctl, [], false, 1);
  await new Promise((r) => setTimeout(r, 1_300));
  t.match(await refusedAgent(t, ctl, dir, 'e1', short), /^MESHP_TOKEN_INVALID: .*expired/, 'an expired token');

  const other = decodeToken(await tokenFor(ctl));
  const pinned = encodeToken({ ...other.claims, fingerprint: 'ab'.repeat(32) }, other.secret);
  t.match(await refusedAgent(t, ctl, dir, 'p1', pinned), /^MESHP_TLS_PIN: /, 'a controller whose certificate is not the pinned one');
  const wrongPin = join(dir, 'wrong-pin.credential');
  writeFileSync(wrongPin, readFileSync(join(ctl.state, 'admin.credential'), 'utf8').replace(/\.[0-9a-f]{64}\./, `.${'cd'.repeat(32)}.`));
  t.match((await meshpAsync('node', 'list', '--credential', wrongPin, '--controller', ctl.address)).err, /^MESHP_TLS_PIN: /, 'the CLI pins too');

  const wrongAdmin = join(dir, 'wrong.credential');
  writeFileSync(wrongAdmin, readFileSync(join(ctl.state, 'admin.credential'), 'utf8').replace(/\.[^.]+$/, `.${'x'.repeat(43)}\n`));
  const denied = await meshpAsync('node', 'list', '--credential', wrongAdmin, '--controller', ctl.address);
  t.equal(denied.code, 1);
  t.match(denied.err, /^MESHP_AUTH_FAILED: /, 'a wrong admin credential');
  await logged('MESHP_AUTH_FAILED');

  // In process: a node of our own, enrolled through the transport.
  const fingerprint = real.claims.fingerprint;
  const link = new GrpcControlLink({ address: ctl.address, fingerprint, maxMessageBytes: 64 * 1024 * 1024 });
  t.teardown(() => link.close());
  const me = keyPair();
  const enrolled = await link.enrol({ token: await tokenFor(ctl), nodeKey: me.nodeKey, node: 'x1', endpoints: [] });
  t.equal(enrolled.node, 'x1');

  const hello =
    (node: string, signer = me.sign) =>
    (nonce: Uint8Array) => ({
      hello: { node, credential: enrolled.credential, appliedVersion: 0, stateHash: '', revision: 1, signature: signer(challengePayload(node, nonce)) },
    });
  const snooping = await syncAs(link, hello('b1'));
  t.equal(snooping.error?.code, 'MESHP_FORBIDDEN', "a node asking for another node's state");
  t.notOk(snooping.messages.includes('delta'), 'and it was sent nothing of it');
  await logged('MESHP_FORBIDDEN');

  const thief = keyPair();
  const stolen = await syncAs(link, hello('x1', thief.sign));
  t.equal(stolen.error?.code, 'MESHP_AUTH_FAILED', 'a credential presented without the key it was enrolled with');
  // The released v1-r1 hello carries no signature: refused on purpose (proto/README.md), whatever revision it says.
  const v1r1 = await syncAs(
    link,
    hello('x1', () => Buffer.alloc(0)),
  );
  t.equal(v1r1.error?.code, 'MESHP_AUTH_FAILED', 'an unsigned (v1-r1) hello');
  t.match(v1r1.error?.message ?? '', /unsigned hello .*v1-r1/, 'named as the deliberate break');

  const oversizedEnrol = await link
    .enrol({ token: await tokenFor(ctl), nodeKey: 'k'.repeat(5 * 1024 * 1024), node: 'big', endpoints: [] })
    .catch((e: unknown) => e);
  t.ok(isMeshpError(oversizedEnrol, 'MESHP_MESSAGE_TOO_LARGE'), `an oversized enrolment: ${String(oversizedEnrol)}`);
  await ctl.proc.waitFor((l) => l.code === 'MESHP_MESSAGE_TOO_LARGE' && l.method === 'Enrol', 5_000);

  const huge = {
    appliedVersion: 0,
    mode: 'converged' as const,
    firewallKind: 'none',
    firewallActive: false,
    at: '',
    resources: [{ key: 'file:/x', kind: 'file' as const, module: 'm', state: 'owned' as const, reason: 'r'.repeat(5 * 1024 * 1024) }],
  };
  const oversized = await syncAs(link, hello('x1'), (send) => setTimeout(() => send({ report: huge }), 200));
  t.equal(oversized.error?.code, 'MESHP_MESSAGE_TOO_LARGE', 'an oversized message on the stream');
  await ctl.proc.waitFor((l) => l.code === 'MESHP_MESSAGE_TOO_LARGE' && l.method === 'Sync', 5_000);

  const small = new GrpcControlLink({ address: ctl.address, fingerprint });
  t.teardown(() => small.close());
  const local = await small.enrol({ token: await tokenFor(ctl), nodeKey: 'k'.repeat(5 * 1024 * 1024), node: 'big2', endpoints: [] }).catch((e: unknown) => e);
  t.ok(isMeshpError(local, 'MESHP_MESSAGE_TOO_LARGE'), 'the client side has the same limit');

  const usage = await meshpAsync('node', 'show', '--state', ctl.state, '--controller', ctl.address);
  t.equal(usage.code, 2, 'a usage error exits 2');
  const notAssigned = await meshpAsync('module', 'take', 'b1', 'nosuch', '--yes', '--state', ctl.state, '--controller', ctl.address);
  t.equal(notAssigned.code, 2, 'taking a module not assigned is a usage error');
  t.match(notAssigned.err, /^MESHP_USAGE: module nosuch is not assigned to b1\n$/, 'a refusal is one coded line');

  t.ok(good.proc.alive, 'the honest agent was never disturbed');
});
