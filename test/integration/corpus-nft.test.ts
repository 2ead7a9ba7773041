/**
 * The corpus of found firewalls (test/helpers/corpus.ts) on nftables: every nftables fixture,
 * every check, real packets between namespaces, one bed shared by all fixtures.
 */
import t from 'tap';
import { corpus, fixturesOf } from '../helpers/corpus.js';
import { labAvailable } from '../helpers/netns.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else corpus(t, fixturesOf('nftables'), null);
