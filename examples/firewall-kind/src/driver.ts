/**
 * The `ufw` kind, spoken through ufw's own commands: openings are `ufw allow … comment 'meshp:<id>'`,
 * forwarded openings and refusals are route rules (`ufw route …`). Reading back goes through
 * ufw's rule files, where the comments live. Derived tables reuse the iptables kind's driver.
 */
import {
  MeshpError,
  type DerivedFilter,
  type Door,
  type EnsureResult,
  type FirewallDescription,
  type FirewallDriver,
  type Opening,
  type Reach,
  type RetiredState,
} from '@meshp/core';
import { IptablesDriver, IptablesTool, MARK, parseCidr, parseSave, runChecked, type Backend, type CommandRunner } from '@meshp/firewall-iptables';
import { parseTuples, ruleKey, ruleWords, type UfwRule } from './tuples.js';

export interface UfwDriverOptions {
  /** Runs ufw and the iptables tools (in a lab: inside the namespace and a private mount namespace). */
  runner: CommandRunner;
  root: string;
  privateRange?: string;
}

export class UfwDriver implements FirewallDriver {
  readonly kind = 'ufw';
  constructor(readonly options: UfwDriverOptions) {}

  private ufw(args: string[]) {
    return runChecked(this.options.runner, 'ufw', args);
  }

  /** ufw calls `iptables`: whichever backend that alternative points to holds its chains. */
  async backend(): Promise<Backend> {
    const r = await runChecked(this.options.runner, 'iptables', ['--version']);
    return r.stdout.includes('nf_tables') ? 'nft' : 'legacy';
  }

  async active(): Promise<boolean> {
    return /^Status: active/m.test((await this.ufw(['status'])).stdout);
  }

  async rules(): Promise<UfwRule[]> {
    const out: UfwRule[] = [];
    for (const f of ['/etc/ufw/user.rules', '/etc/ufw/user6.rules']) {
      const r = await this.options.runner('cat', [f]);
      if (r.code === 0) out.push(...parseTuples(r.stdout));
    }
    return out;
  }

  async describe(): Promise<FirewallDescription> {
    const active = await this.active();
    const rules = await this.rules();
    return {
      kind: this.kind,
      manager: 'ufw',
      active,
      tables: [`${await this.backend()} filter (ufw-* chains)`],
      configFile: `${this.options.root.replace(/\/$/, '')}/etc/ufw/user.rules`,
      summary: [`ufw ${active ? 'active' : 'inactive'}`, `${rules.length} rules, ${rules.filter((r) => r.comment?.startsWith(MARK)).length} meshp`],
    };
  }

  async openings(): Promise<Opening[]> {
    const groups = new Map<string, UfwRule[]>();
    for (const r of await this.rules()) {
      if (!r.comment?.startsWith(MARK) || !/^\d+$/.test(r.port) || (r.protocol !== 'tcp' && r.protocol !== 'udp')) continue;
      const id = r.comment.slice(MARK.length);
      groups.set(id, [...(groups.get(id) ?? []), r]);
    }
    const out: Opening[] = [];
    for (const [id, rules] of groups) {
      const first = rules[0]!;
      const denies = rules.filter((r) => r.action === 'deny' || r.action === 'reject');
      // A refusal's allow from the private range is part of how it is written, not a range it drops.
      const counted = denies.length ? denies : rules;
      const from = counted.some((r) => r.from === 'any') ? [] : [...new Set(counted.map((r) => r.from))].sort();
      out.push({
        id,
        module: id.split('/')[0] ?? '',
        port: Number(first.port),
        protocol: first.protocol as Opening['protocol'],
        from,
        path: first.route ? 'forwarded' : 'incoming',
        action: denies.length ? 'drop' : 'accept',
      });
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }

  /** The ufw rules one opening or refusal stands for, in the order they must end up. */
  wantedRules(o: Opening): UfwRule[] {
    const base = { route: o.path === 'forwarded', protocol: o.protocol, port: String(o.port), comment: `${MARK}${o.id}` };
    const froms = o.from.length ? [...new Set(o.from.map((f) => parseCidr(f).text))] : ['any'];
    if (o.action === 'accept') return froms.map((from) => ({ ...base, action: 'allow' as const, from }));
    // ufw has no "! -s": outside the private range is an allow from it, then a deny from anywhere.
    if (o.from.length === 0 && this.options.privateRange) {
      return [
        { ...base, action: 'allow', from: parseCidr(this.options.privateRange).text },
        { ...base, action: 'deny', from: 'any' },
      ];
    }
    return froms.map((from) => ({ ...base, action: 'deny' as const, from }));
  }

  /** ufw has no batch: each command reloads its chains. Deletions first, then denies at the top, then allows. */
  async ensure(openings: Opening[], refusals: Opening[]): Promise<EnsureResult> {
    const wanted = [...openings, ...refusals].flatMap((o) => this.wantedRules(o));
    const present = (await this.rules()).filter((r) => r.comment?.startsWith(MARK));
    const presentKeys = new Set(present.map(ruleKey));
    const wantedKeys = new Set(wanted.map(ruleKey));
    const stale = [...new Map(present.filter((r) => !wantedKeys.has(ruleKey(r))).map((r) => [ruleKey(r), r])).values()];
    const missing = [...new Map(wanted.filter((r) => !presentKeys.has(ruleKey(r))).map((r) => [ruleKey(r), r])).values()];
    // A route rule is deleted with `ufw route delete …`; `ufw delete route …` is a syntax error.
    for (const r of stale) await this.ufw(r.route ? ['route', 'delete', ...ruleWords(r).slice(1)] : ['delete', ...ruleWords(r)]);
    let any = (await this.rules()).length > 0;
    // Denies go to the top (refusals are final); a refusal's allow from the private range goes above its deny.
    const denies = missing.filter((r) => r.action === 'deny');
    const allows = missing.filter((r) => r.action !== 'deny');
    const refusalAllows = allows.filter((r) => denies.some((d) => d.comment === r.comment) || refusals.some((x) => `${MARK}${x.id}` === r.comment));
    for (const r of [...denies, ...refusalAllows]) {
      const words = ruleWords(r);
      const at = any ? [...(r.route ? ['route'] : []), 'insert', '1', ...words.slice(r.route ? 1 : 0)] : words;
      await this.ufw([...at, 'comment', r.comment!]);
      any = true;
    }
    for (const r of allows.filter((x) => !refusalAllows.includes(x))) await this.ufw([...ruleWords(r), 'comment', r.comment!]);
    const ids = (rs: UfwRule[]) => [...new Set(rs.map((r) => r.comment!.slice(MARK.length)))].sort();
    const wantedIds = new Set([...openings, ...refusals].map((o) => o.id));
    return { added: ids(missing), removed: ids(stale).filter((id) => !wantedIds.has(id)) };
  }

  #iptables: Promise<IptablesDriver> | undefined;

  /** One iptables driver for this driver's life: it remembers the derived filter it loaded. */
  private iptables(): Promise<IptablesDriver> {
    this.#iptables ??= this.backend().then(
      (b) => new IptablesDriver(b, { runner: this.options.runner, root: this.options.root, privateRange: this.options.privateRange }),
      (e: unknown) => {
        this.#iptables = undefined; // not learnt: asked again next time
        throw e;
      },
    );
    return this.#iptables;
  }

  /** ufw's chains are iptables chains: the iptables kind's reach walk reads them as packets meet them. */
  async reachability(doors: Door[], options?: { explain?: boolean }): Promise<Reach[]> {
    return (await this.iptables()).reachability(doors, options);
  }

  async loadDerived(filter: DerivedFilter): Promise<void> {
    await (await this.iptables()).loadDerived(filter);
  }

  async unloadDerived(): Promise<void> {
    await (await this.iptables()).unloadDerived();
  }

  /**
   * `ufw-init stop` removes ufw's chains and sets the builtin policies to ACCEPT, leaving
   * /etc/ufw alone (`ufw disable` would rewrite ufw.conf). It also opens FORWARD, which would
   * expose Docker's networks: FORWARD's policy is put back when Docker's chains are there.
   */
  async retire(): Promise<RetiredState> {
    const backend = await this.backend();
    const tool = new IptablesTool(backend, 4, this.options.runner);
    const before = parseSave((await runChecked(this.options.runner, tool.saveCmd, [])).stdout).tables.find((t) => t.name === 'filter');
    const forward = before?.chains.find((c) => c.name === 'FORWARD')?.policy ?? 'ACCEPT';
    const docker = !!before?.chains.some((c) => c.name.startsWith('DOCKER'));
    await runChecked(this.options.runner, '/lib/ufw/ufw-init', ['stop']);
    if (docker && forward !== 'ACCEPT') await tool.restore(`*filter\n:FORWARD ${forward} [0:0]\nCOMMIT\n`);
    return { kind: this.kind, backend, forward, at: new Date().toISOString() };
  }

  async reenable(_state: RetiredState): Promise<void> {
    const conf = await this.options.runner('cat', ['/etc/ufw/ufw.conf']);
    if (!/^ENABLED=yes/im.test(conf.stdout)) {
      throw new MeshpError('MESHP_FIREWALL_FAILED', 'ufw is not enabled in its config; it cannot be re-enabled without changing it');
    }
    await runChecked(this.options.runner, '/lib/ufw/ufw-init', ['start']);
    if (!(await this.active())) throw new MeshpError('MESHP_FIREWALL_FAILED', 'ufw did not start');
  }
}
