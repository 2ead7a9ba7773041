/**
 * Atomic enrolment over real gRPC: an Enrol whose answer is lost (dropped before the client reads
 * it: fault injected with sinon around the real call) leaves a membership whose credential nobody
 * holds; the same token with the same key completes it (a new credential, the same membership), a
 * different key is refused with a code, and once the node has opened a stream with its credential
 * the token is spent for good. The node ends enrolled with gap 0.
 */
import t from 'tap';
import sinon from 'sinon';
import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import { MeshpError, type EnrolInput } from '@meshp/core';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { GrpcControlLink } from '@meshp/transport-grpc';
import { ensureNodeKey } from '../../bin/src/remote/keys.js';
import { nodes, startAgent, startController, tokenFor, waitUntil, workdir } from '../helpers/grpc-procs.js';

const refusal = async (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'accepted',
    (e: unknown) => (e instanceof MeshpError ? `${e.code}: ${e.message}` : String(e)),
  );

t.test('an enrolment whose answer was lost is completed by the same token and key, never by another key', async (t) => {
  const dir = workdir(t, 'enrol-atomic');
  const ctl = await startController(t, join(dir, 'ctl'));
  const { fingerprint } = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
  const link = new GrpcControlLink({ address: ctl.address, fingerprint });
  t.teardown(() => link.close());

  const peer = startAgent(t, dir, 'n0', ctl.address, await tokenFor(ctl, ['t']));
  await peer.proc.waitFor((l) => l.msg === 'applied');

  const token = await tokenFor(ctl, ['t']);
  const state = join(dir, 'n1', 'state');
  const key = ensureNodeKey(state);
  const input: EnrolInput = { token, nodeKey: key.publicKey, node: 'n1', endpoints: [] };

  // The controller enrols and answers; the answer is dropped before this client reads it.
  const real = GrpcControlLink.prototype.enrol;
  const drop = sinon.stub(GrpcControlLink.prototype, 'enrol').callsFake(async function (this: GrpcControlLink, i: EnrolInput) {
    await real.call(this, i);
    throw new MeshpError('MESHP_UNAVAILABLE', 'the answer was lost (injected)');
  });
  t.match(await refusal(link.enrol(input)), /^MESHP_UNAVAILABLE/, 'the client never got its credential');
  drop.restore();
  t.ok(
    (await nodes(ctl)).some((n) => n.name === 'n1'),
    'the node is a member, its credential with no one',
  );

  const other = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  t.match(
    await refusal(link.enrol({ ...input, nodeKey: other, node: 'thief' })),
    /^MESHP_TOKEN_INVALID: .*already used .*another key/,
    'the same token with another key is refused',
  );

  // The real agent, with the same state folder (the same key) and the same token: the enrolment is completed.
  const mark = ctl.proc.lines.length;
  const agent = startAgent(t, dir, 'n1', ctl.address, token);
  await ctl.proc.waitFor((l) => l.msg?.startsWith('enrolment completed again') === true && l.node === 'n1', 30_000, mark);
  await agent.proc.waitFor((l) => l.msg === 'applied', 30_000);
  const settled = await waitUntil(
    'n0 and n1 at gap 0',
    async () => {
      const ns = await nodes(ctl);
      return ns.length === 2 && ns.every((n) => n.gap === 0 && n.appliedVersion > 0) && ns;
    },
    30_000,
  );
  t.same(settled.map((n) => n.name).sort(), ['n0', 'n1'], 'one membership for n1, enrolled, gap 0');
  t.equal(ctl.proc.lines.slice(mark).filter((l) => l.msg === 'node enrolled').length, 0, 'the retry joined no one: it completed the first enrolment');

  // The node opened its stream with the credential: the token is spent for good, even with its key.
  await ctl.proc.waitFor((l) => l.msg === 'sync stream opened' && l.node === 'n1', 15_000, mark);
  t.match(await refusal(link.enrol(input)), /^MESHP_TOKEN_INVALID: .*already used/, 'after the first stream, the token completes nothing');
  t.ok(agent.proc.alive && peer.proc.alive, 'both agents run');
});
