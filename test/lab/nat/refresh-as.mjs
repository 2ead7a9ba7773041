// One allocation on a TURN server made under a first credential, then a Refresh under a second one
// (another TURN REST username for the same name) and one under the first again; prints what each got.
// usage: node refresh-as.mjs '{"server":["IP",PORT],"first":{"username","password"},"second":{…}}'
import { Message, classes, createTurnClient, makeIntegrityKey, methods } from 'werift-ice';

const conf = JSON.parse(process.argv[2]);
const turn = await createTurnClient({ address: conf.server, ...conf.first }, { transport: 'udp' });
const refresh = async (cred) => {
  turn.username = cred.username;
  turn.password = cred.password;
  turn.integrityKey = makeIntegrityKey(turn.username, turn.realm, turn.password);
  const m = new Message(methods.REFRESH, classes.REQUEST);
  m.setAttribute('LIFETIME', 600);
  try {
    await turn.requestWithRetry(m, turn.server);
    return 'ok';
  } catch (e) {
    // coturn answers 441 under the session's own key, which the client does not verify under the
    // new one: no answer it takes (a timeout). `coturn -v` logs "error 441: Wrong Credentials".
    return String(e?.response?.getAttributeValue?.('ERROR-CODE')?.[0] ?? e?.constructor?.name ?? e);
  }
};
const second = await refresh(conf.second);
const first = await refresh(conf.first);
process.stdout.write(JSON.stringify({ relayed: turn.relayedAddress, second, first }) + '\n');
await turn.close().catch(() => undefined);
process.exit(0);
