/**
 * A found firewall that classifies sources by a map into a mark, then tests the mark (issue 32),
 * on real nft in a namespace this test makes: `nft-country-marks.nft` (a mail server's country and
 * ASN marks). The walk reads `meta mark != { $DE }` and `ct mark @asn_blocklist` as the sources the
 * maps give those marks, so ssh is seen open from the country's range and dropped from the rest,
 * and the ASN reject as denying exactly the blocklisted sources: nothing is left unread. Where
 * something else sets the mark too (a constant in another chain), the test stays unread, as before.
 * The corpus (corpus-nft.test.ts) checks the same fixture with real packets and the mesh's opening.
 */
import t from 'tap';
import { parseRuleset, reachOfRuleset } from '@meshp/firewall-nftables';
import { fixture } from '../helpers/corpus.js';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';

const SSH = { port: 22, protocol: 'tcp', path: 'incoming' } as const;
const MESH = { port: 7443, protocol: 'tcp', path: 'incoming' } as const;

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('nft-country-marks.nft: a mark set from a source map is read as those sources', async (t) => {
    const ns = await netns(t, `${runPrefix('nm')}s`);
    const f = fixture('nft-country-marks.nft');
    t.comment(f.source);
    await ns.exec('nft', ['-f', '-'], f.text);
    const listed = async () => parseRuleset((await ns.exec('nft', ['-j', 'list', 'ruleset'])).stdout);

    const [ssh, mesh] = reachOfRuleset(await listed(), [SSH, MESH], true);
    t.same(ssh!.unread ?? [], [], 'every mark test on the ssh path is read');
    t.equal(ssh!.now, 'open-from');
    // Opened to every source by `tcp dport 22 ct state new accept`; what is dropped on the way is the walk's answer.
    const dropped = (ssh!.droppedBy ?? []).flatMap((d) => d.from);
    t.ok(dropped.includes('10.80.3.66/32') && dropped.includes('fd80:3::66/128'), "the blocklisted ASN's sources are rejected");
    t.ok(dropped.includes('10.81.0.0/16'), 'the other country is dropped by the mark test');
    t.notOk(
      dropped.some((c) => c.startsWith('10.80.1.') || c === '10.80.0.0/16'),
      'the country the mark names (10.80.0.0/16, the ASN ban aside) is not',
    );
    t.same(mesh!.unread ?? [], [], 'on the mesh port too: the ASN reject is read, not a guess');
    t.same(
      (mesh!.droppedBy ?? [])
        .filter((d) => d.rule.includes('reject'))
        .flatMap((d) => d.from)
        .sort(),
      ['10.80.3.66/32', '203.0.113.0/24', 'fd80:3::66/128'],
      'the reject denies exactly the blocklisted sources',
    );

    // Something else sets the packet mark as well: the country test can no longer be read.
    await ns.exec('nft', ['add chain inet filter pre { type filter hook prerouting priority -150; }']);
    await ns.exec('nft', ['add rule inet filter pre meta mark set 0x114']);
    const [again] = reachOfRuleset(await listed(), [SSH], true);
    t.match(
      (again!.unread ?? []).map((u) => u.rule),
      [/input/],
      'a mark set elsewhere too: the mark test is unread, not read from the map alone',
    );
  });
}
