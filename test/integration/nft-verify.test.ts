/**
 * Through the host's reconcile, on real nft in a namespace: an opening the found firewall leaves
 * no place for is refused (MESHP_OPENING_UNPLACEABLE) with nothing written; one behind a rule the
 * walk cannot read (a blocklist set whose elements carry timeouts) is reported unverified, naming
 * it; one behind a plain named blocklist set, read by the walk, and one placed and seen open are
 * created.
 */
import t from 'tap';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { labAvailable, netns, runPrefix, type Teardownable } from '../helpers/netns.js';
import { fixture } from '../helpers/corpus.js';

const key = 'opening:web/incoming/tcp/7443';
const web = { name: 'web', taken: true, openings: [{ port: 7443, path: 'incoming' as const, from: ['10.80.0.0/16'] }] };

const ZONED = `flush ruleset
table inet filter {
	chain input {
		type filter hook input priority 0; policy accept;
		ct state established,related accept
		jump zone
	}
	chain zone {
		ip saddr 10.80.3.66 reject
		tcp dport 22 accept
		reject
	}
}
`;

/** A blocklist whose bans expire, as ban tools keep them (fail2ban, sshguard, CrowdSec): each element carries its timeout; until then it is a ban. */
const EXPIRING = `flush ruleset
table inet filter {
	set blocklist_v4 {
		type ipv4_addr
		flags timeout
		elements = { 10.80.3.66 timeout 1h }
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		ip saddr @blocklist_v4 drop
		tcp dport 22 accept
	}
}
`;

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const run = async (tt: Teardownable, text: string) => {
    const ns = await netns(tt, `${runPrefix('nv')}s`);
    await ns.exec('nft', ['-f', '-'], text);
    const before = (await ns.exec('nft', ['list', 'ruleset'])).stdout;
    const b = bed(tt);
    const r = await b.apply(declaration('adopted', [web]), { extra: [new NftablesPlugin({ netns: ns.name })] });
    const after = (await ns.exec('nft', ['list', 'ruleset'])).stdout;
    return { r, before, after, reason: r.report.resources.find((x) => x.key === key)?.reason ?? '' };
  };

  t.test('no place: refused, naming the jump, nothing written', async (t) => {
    const { r, before, after, reason } = await run(t, ZONED);
    t.equal(stateOf(r, key), 'refused');
    t.match(reason, /^MESHP_OPENING_UNPLACEABLE: .*jump zone/);
    t.equal(after, before, 'nothing written');
  });

  t.test('behind a named set whose bans expire (elements with timeouts): the walk reads them as bans, created', async (t) => {
    const { r, after } = await run(t, EXPIRING);
    t.equal(stateOf(r, key), 'created');
    t.equal(r.report.counts.unverified ?? 0, 0, 'nothing unverified');
    // The accept is below the ban (the set's drop), above nothing else: the placement rule read the set.
    const lines = after.split('\n').map((l) => l.trim());
    t.ok(lines.findIndex((l) => l.startsWith('ip saddr @blocklist_v4 drop')) < lines.findIndex((l) => l.includes('meshp:')), 'the accept below the ban');
  });

  t.test('behind a plain named blocklist set: the walk reads its elements, created', async (t) => {
    const { r } = await run(t, fixture('nft-blocklist.nft').text);
    t.equal(stateOf(r, key), 'created');
  });

  t.test('placed and seen open: created', async (t) => {
    const { r } = await run(t, fixture('puppet-nftables.nft').text);
    t.equal(stateOf(r, key), 'created');
  });
}
