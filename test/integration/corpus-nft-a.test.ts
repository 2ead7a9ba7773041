/** Part of the corpus of found firewalls (test/helpers/corpus.ts) on nftables: every check, real packets between namespaces. */
import t from 'tap';
import { corpus } from '../helpers/corpus.js';
import { labAvailable } from '../helpers/netns.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else corpus(t, ['debian-workstation.nft', 'nixos-firewall.nft'], null);
