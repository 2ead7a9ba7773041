/**
 * A client in another language, written from proto/meshp/v1/control.proto and its comments alone
 * (test/compat/python/meshp_client.py: Python, grpcio, stubs generated from the proto here, its own
 * TLS pin, Ed25519 key, applier and state hash), against a real `meshp controller serve` on
 * 127.0.0.1. It enrols, applies a snapshot, a join, UNSCOPED and REMOVED (made through the CLI) and
 * a declaration, with the hash it computes equal to the one the controller expects for every delta
 * and its acks accepted (gap 0); it resumes on a new stream with the version signature it kept; and
 * it reads the refusals' codes. The Python side is Debian's (`make apt`, run by `make test`): python3 with
 * python3-grpcio, python3-protobuf and python3-cryptography; the stubs come from Debian's protoc and
 * grpc_python_plugin. Nothing comes from PyPI, which the machines this runs on do not reach.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, adminCli, startController, waitUntil, workdir, writeJson, type LogLine, nodes as listNodes, tokenFor } from '../helpers/grpc-procs.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
// Debian's own Python with Debian's grpcio, protobuf and cryptography (APT_PKGS): PyPI is not needed.
const PY = process.env.MESHP_PYTHON ?? '/usr/bin/python3';
const PROTOC = 'protoc';
const GRPC_PLUGIN = '/usr/bin/grpc_python_plugin';
const CLIENT = join(ROOT, 'test/compat/python/meshp_client.py');

t.test(
  'a Python client from control.proto alone follows a real controller',
  { skip: existsSync(PY) && existsSync(GRPC_PLUGIN) ? false : `no ${PY} or ${GRPC_PLUGIN}: run make apt (make test runs it)` },
  async (t) => {
    const dir = workdir(t, 'python');
    const state = join(dir, 'ctl');
    const stubs = join(dir, 'stubs');
    mkdirSync(stubs);
    const gen = spawnSync(
      PROTOC,
      ['-I', join(ROOT, 'proto'), `--python_out=${stubs}`, `--grpc_out=${stubs}`, `--plugin=protoc-gen-grpc=${GRPC_PLUGIN}`, 'meshp/v1/control.proto'],
      { encoding: 'utf8' },
    );
    t.equal(gen.status, 0, `stubs generated from control.proto: ${gen.stderr}`);

    const ctl = await startController(t, state);
    const { ok, policy } = adminCli(t, ctl, dir);
    const client = (name: string, ...args: string[]) =>
      new Proc(t, ['follow', '--stubs', stubs, '--state', join(dir, name), '--controller', ctl.address, '--name', name, ...args], undefined, CLIENT, PY);
    const applied = (p: Proc, pred: (l: LogLine) => boolean, from: number) => p.waitFor((l) => l.event === 'applied' && pred(l), 20_000, from);
    const inHashAgreement = (p: Proc) => {
      const all = p.lines.filter((l) => l.event === 'applied');
      t.ok(
        all.length > 0 && all.every((l) => l.match === true && l.signed === true),
        `every delta to the Python client hashed as the controller expects, and signed (${all.length})`,
      ) || t.comment(JSON.stringify(all.filter((l) => l.match !== true)));
    };
    policy([['web', 'db']]);

    const webToken = await tokenFor(ctl, ['web']);
    let web = client('pyweb', '--token', webToken);
    const enrolled = await web.waitFor((l) => l.event === 'enrolled' || l.event === 'refused', 20_000);
    t.equal(enrolled.event, 'enrolled', `enrolled: ${JSON.stringify(enrolled)}`);
    t.equal(enrolled.node, 'pyweb');
    t.equal(enrolled.network, 'default');
    await applied(web, (l) => l.snapshot === true, 0);

    // A join the client can see.
    let mark = web.lines.length;
    const db = client('pydb', '--token', await tokenFor(ctl, ['db']));
    const join1 = await applied(web, (l) => (l.upserted as string[]).includes('pydb'), mark);
    t.same(join1.peers, ['pydb'], 'the join: pydb upserted');
    await applied(db, (l) => l.snapshot === true, 0);

    // UNSCOPED: the policy no longer lets pyweb see pydb; then it does again.
    mark = web.lines.length;
    policy([]);
    const hidden = await applied(web, (l) => (l.unscoped as string[]).length > 0, mark);
    t.same([hidden.unscoped, hidden.removed], [['pydb'], []], 'a policy change: pydb removed with REMOVAL_REASON_UNSCOPED');
    mark = web.lines.length;
    policy([['web', 'db']]);
    await applied(web, (l) => (l.upserted as string[]).includes('pydb'), mark);

    // REMOVED: `meshp node remove`; pydb's stream ends with MESHP_NODE_REVOKED, and so does its next hello.
    mark = web.lines.length;
    ok('node', 'remove', 'pydb', '--yes');
    const gone = await applied(web, (l) => (l.removed as string[]).length > 0, mark);
    t.same([gone.removed, gone.unscoped], [['pydb'], []], 'node remove: pydb removed with REMOVAL_REASON_REMOVED');
    const dbEnd = await db.waitFor((l) => l.event === 'closed', 20_000);
    t.equal(dbEnd.code, 'MESHP_NODE_REVOKED', `the removed node's stream ends with its code (${String(dbEnd.message)})`);
    const dbAgain = client('pydb');
    const refusedAgain = await dbAgain.waitFor((l) => l.event === 'closed', 20_000);
    // Its hello is signed by the key revoked under its name: the answer says so (an agent then leaves, issue 33).
    t.equal(refusedAgain.code, 'MESHP_NODE_REVOKED', 'its credential is refused from then on, as a removed node');

    // A declaration (a module with a file): the component hash over every field of the declaration.
    ok(
      'catalogue',
      'add',
      writeJson(dir, 'web.json', {
        modules: [
          {
            name: 'web',
            files: [{ path: '/etc/web.conf', content: 'x = "é"\n', mode: '0640' }],
            openings: [{ port: 8080, protocol: 'tcp', path: 'incoming' }],
          },
        ],
      }),
      '--yes',
    );
    mark = web.lines.length;
    ok('module', 'assign', 'pyweb', 'web', '--yes');
    await web.waitFor((l) => l.event === 'applied' && l.from_version !== 0, 20_000, mark);
    inHashAgreement(web);
    const last = web.lines.filter((l) => l.event === 'applied').at(-1)!;
    const row = await waitUntil('pyweb at gap 0', async () =>
      (await listNodes(ctl)).find((x) => x.name === 'pyweb' && x.gap === 0 && x.appliedVersion === last.to_version),
    );
    t.equal(row.appliedVersion, last.to_version, "the controller took the Python client's acks: gap 0 at the version it applied");

    // A new stream resumes from the version the client kept, with the controller's signature of it.
    web.kill('SIGKILL');
    await web.exited;
    const ctlMark = ctl.proc.lines.length;
    web = client('pyweb');
    const opened = await ctl.proc.waitFor((l) => l.msg === 'sync stream opened' && l.node === 'pyweb', 20_000, ctlMark);
    t.equal(opened.resume, true, 'the hello of the restarted client resumes (no snapshot)');
    t.equal(opened.appliedVersion, last.to_version);
    web.kill('SIGKILL');
    await web.exited;

    // The refusals, each read from its MESHP code.
    const probe = new Proc(
      t,
      ['probe', '--stubs', stubs, '--state', join(dir, 'pyweb'), '--controller', ctl.address, '--token', await tokenFor(ctl), '--used-token', webToken],
      undefined,
      CLIENT,
      PY,
    );
    const r = (await probe.waitFor((l) => l.event === 'probed', 30_000)) as Record<string, { code: string; errors?: { code: string }[] }>;
    t.equal(r.replayed_token!.code, 'MESHP_TOKEN_INVALID', 'a replayed token');
    t.equal(r.key_in_use!.code, 'MESHP_KEY_IN_USE', "this node's key under another name");
    t.equal(r.foreign_signature!.code, 'MESHP_AUTH_FAILED', 'a hello signed with another key');
    t.same(
      r.foreign_signature!.errors?.map((e) => e.code),
      ['MESHP_AUTH_FAILED'],
      'told in a SyncError too',
    );
    t.equal(r.unproven_version!.code, 'MESHP_VERSION_UNPROVEN', 'a version claimed without its signature');
    t.equal(r.garbage!.code, 'MESHP_MESSAGE_MALFORMED', 'bytes that are not a SyncRequest');
    t.equal(await probe.exited, 0);
  },
);
