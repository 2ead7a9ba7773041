/**
 * Loaded before every test file (tap's `node-arg` in package.json). The runner, not the file, keeps
 * the time: the file's own timer is switched off, and the runner is told the configured timeout in
 * idle-machine time, stretched while the machine is busy (see budget.ts).
 */
import { fileBudget } from './budget.js';

const configured = Number(process.env['TAP_TIMEOUT'] ?? 30);
if (process.env['TAP_CHILD_KEY'] !== undefined && configured > 0) {
  process.env['TAP_TIMEOUT'] = '0';
  fileBudget(configured);
}
