import t from 'tap';
import { labAvailable } from '../helpers/netns.js';
import { iptScenarios } from '../helpers/ipt-scenarios.js';

if (!labAvailable()) t.skip('needs root to build network namespaces');
else iptScenarios(t, 'legacy');
