export { SqliteHostStore } from './host-store.js';
export { SqliteStatePlugin } from './plugin.js';
