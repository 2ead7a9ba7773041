/** One backend (legacy or nft) and one family (IPv4 or IPv6) of the iptables tools. */
import { MeshpError } from '@meshp/core';
import type { Family } from './cidr.js';
import { runChecked, type CommandRunner } from './runner.js';
import { parseSave, type Ruleset } from './save-format.js';

export type Backend = 'legacy' | 'nft';
export const BACKENDS: readonly Backend[] = ['legacy', 'nft'];
export const FAMILIES: readonly Family[] = [4, 6];

export function toolName(backend: Backend, family: Family, op: 'save' | 'restore'): string {
  return `${family === 6 ? 'ip6' : 'ip'}tables-${backend}-${op}`;
}

export function familyName(family: Family): string {
  return family === 6 ? 'ip6' : 'ip';
}

export class IptablesTool {
  /** How many times the ruleset was read (for benchmarks and the no-op reconcile check). */
  reads = 0;
  writes = 0;

  constructor(
    readonly backend: Backend,
    readonly family: Family,
    readonly runner: CommandRunner,
  ) {}

  get saveCmd(): string {
    return toolName(this.backend, this.family, 'save');
  }

  get restoreCmd(): string {
    return toolName(this.backend, this.family, 'restore');
  }

  /** Lists the live tables. iptables-save only lists tables that exist; it never creates one. */
  async save(): Promise<Ruleset> {
    return parseSave(await this.saveText());
  }

  /** The live tables as iptables-save writes them, unparsed. */
  async saveText(): Promise<string> {
    this.reads++;
    return (await runChecked(this.runner, this.saveCmd, [])).stdout;
  }

  /** One atomic transaction: iptables-restore commits a table whole or not at all. */
  async restore(text: string): Promise<void> {
    if (!/^\*\w+\n/.test(text) || !text.trimEnd().endsWith('COMMIT')) {
      throw new MeshpError('MESHP_FIREWALL_FAILED', 'refusing to send a restore input that is not whole tables');
    }
    this.writes++;
    await runChecked(this.runner, this.restoreCmd, ['--noflush', '--wait', '5'], text);
  }
}
