// The admin API is one typed map (issue 17): method → request/answer, derived from control.proto.
// The controller serves it as `AdminMethods<AdminApi>`, so the compiler refuses a map that misses a
// method or answers one with another's shape (the @ts-expect-error lines below are checked by
// `tsc -p tsconfig.tap.json` in `make test`: if they stopped being errors, the type-check fails).
// At run time: every method of the generated service is served, an unknown name is refused, and the
// answers encode through the method's own response message.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMeshpError, type AdminMethods } from '@meshp/core';
import { AuthStore, Controller, Enrolment, MemoryStore, Metrics, adminHandler } from '@meshp/controller';
import { ADMIN_METHODS, wire, type AdminApi, type AdminClient } from '@meshp/transport-grpc';
import pino from 'pino';

// @ts-expect-error a map without every method of the proto does not compile
const missing: AdminMethods<AdminApi> = { listNodes: () => ({ nodes: [] }) };
const wrongShape: Pick<AdminMethods<AdminApi>, 'setPolicy'> = {
  // @ts-expect-error an answer in another method's shape does not compile
  setPolicy: () => ({ nodes: [] }),
};
// @ts-expect-error a request field the method does not have does not compile on the CLI side
const typo = (c: AdminClient) => c.call('showNode', { network: 'n', nod: 'x' });
void missing;
void wrongShape;
void typo;

t.test('every method of the generated Admin service is served; others are refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-admin-map-'));
  const auth = new AuthStore(join(dir, 'auth.db'));
  t.teardown(() => {
    auth.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const controller = new Controller(new MemoryStore());
  controller.createNetwork('n');
  controller.join('n', { id: 'x', nodeKey: 'kx', tags: ['web'] });
  const changed: string[] = [];
  const handler = adminHandler({
    controller,
    enrolment: new Enrolment(controller, auth, 'f'.repeat(64)),
    secret: 's3cret',
    metrics: new Metrics(),
    log: pino({ level: 'silent' }),
    reports: () => null,
    changed: (n) => void changed.push(n),
    live: () => ({ connected: false, lastSeen: '' }),
  });

  // An answer goes through its own response message unchanged (what the compiler checked, on the wire).
  const shown = await handler('showNode', wire.ShowNodeRequest.fromPartial({ network: 'n', node: 'x' }), 's3cret', 'test');
  const decoded = wire.ShowNodeResponse.decode(wire.ShowNodeResponse.encode(wire.ShowNodeResponse.fromPartial(shown)).finish());
  t.equal(decoded.node?.name, 'x', 'showNode answers the node by name');
  t.same(decoded.node?.tags, ['web'], 'with its tags');

  // Every method, in the proto's order (the last ones rename the node and remove the network).
  t.equal(ADMIN_METHODS.length, Object.keys(wire.AdminServiceService).length, 'the transport dispatches every method of the proto');
  for (const method of ADMIN_METHODS) {
    // The request as the transport decodes it: proto defaults for every field left out.
    const requestType = wire[`${method[0]!.toUpperCase()}${method.slice(1)}Request` as keyof typeof wire] as { fromPartial(o: object): object };
    const request = requestType.fromPartial({ network: 'n', node: 'x', module: 'nope', newName: 'x2', tags: ['web'] });
    try {
      const answer = await handler(method, request, 's3cret', 'test');
      t.type(answer, 'object', `${method}: answered`);
    } catch (e) {
      t.ok(isMeshpError(e) && !/no admin method/.test(e.message), `${method}: served (refused on its own terms: ${isMeshpError(e) ? e.code : String(e)})`);
    }
  }
  for (const name of ['nope', 'toString', 'constructor', '__proto__', 'hasOwnProperty']) {
    await t.rejects(
      handler(name, {}, 's3cret', 'test'),
      { code: 'MESHP_USAGE', message: /no admin method/ },
      `${name}: refused, not looked up on the prototype`,
    );
  }
  await t.rejects(handler('listNodes', { network: 'n' }, 'wrong', 'test'), { code: 'MESHP_AUTH_FAILED' }, 'the credential is checked before the method');
});
