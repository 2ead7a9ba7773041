export { ProcFactsPlugin } from './plugin.js';
export { listening, parseProcNet } from './proc-net.js';
export { addresses } from './addresses.js';
