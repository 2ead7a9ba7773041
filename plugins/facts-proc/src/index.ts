export { ProcFactsPlugin } from './plugin.js';
export { establishedTo, listening, parseEstablished, parseProcNet, type Established } from './proc-net.js';
export { addresses } from './addresses.js';
