import t from 'tap';
import { labAvailable } from '../helpers/netns.js';
import { iptScenarios } from '../helpers/ipt-scenarios.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else iptScenarios(t, 'legacy');
