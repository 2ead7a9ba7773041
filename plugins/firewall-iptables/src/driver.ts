/** The driver of one iptables kind: `iptables-legacy` or `iptables-nft`, IPv4 and IPv6. */
import { access } from 'node:fs/promises';
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
  type RouteForward,
} from '@meshp/core';
import { planRoutes } from './forward.js';
import type { Family } from './cidr.js';
import { configFile } from './config.js';
import { derivedState, loadDerived, unloadDerived } from './derived.js';
import { inspectBackend, readSaves, savesKey } from './inspect.js';
import { toOpenings, type MarkedSpec } from './marks.js';
import { desiredSpecs, planEnsure, presentMarked, type EnsureEdit, type Unplaceable } from './plan.js';
import { reachOfFilters } from './reach.js';
import { reenable, retire } from './retire.js';
import { readArrivals } from './routes.js';
import { readIpsets } from './ipsets.js';
import type { CommandRunner } from './runner.js';
import { findTable, parseSave, transaction, type SavedTable } from './save-format.js';
import { familyName, FAMILIES, IptablesTool, type Backend } from './tool.js';
import { IptablesWatcher, whileWriting, type WatchOptions } from './watch.js';

export interface IptablesDriverOptions {
  /** Commands run through this (default: on the machine). */
  runner: CommandRunner;
  /** Root prefix of the config files. */
  root: string;
  /** The private network: refusals without `from` drop everything outside it. */
  privateRange?: string;
  /** How `watch` reads (intervals). */
  watch?: WatchOptions;
}

export class IptablesDriver implements FirewallDriver {
  readonly kind: string;
  readonly tools: Record<Family, IptablesTool>;
  /** The derived filter this driver last loaded: its filter, and what stood in each family after. */
  #derived: { key: string; state: Record<Family, string[]> } | undefined;

  constructor(
    readonly backend: Backend,
    readonly options: IptablesDriverOptions,
  ) {
    this.kind = `iptables-${backend}`;
    this.tools = { 4: new IptablesTool(backend, 4, options.runner), 6: new IptablesTool(backend, 6, options.runner) };
  }

  /**
   * The live filter table of each family (null when the family has no filter table), with the routes
   * read beside it (routes.ts); from the saves given (`read`, already counted), else read now.
   */
  async filters(read?: Record<Family, string>): Promise<Record<Family, SavedTable | undefined>> {
    const state = await inspectBackend(this.backend, this.options.runner, read);
    if (!read) for (const t of FAMILIES) this.tools[t].reads++;
    // The routes are read only when a rule matches an incoming interface other than lo.
    const onInterface = state.families.some((f) =>
      f.ruleset.tables.some((t) => t.rules.some((r) => r.args.some((a, i) => (a === '-i' || a === '--in-interface') && r.args[i + 1] !== 'lo'))),
    );
    const arrivals = onInterface ? await readArrivals(this.options.runner) : undefined;
    // The ipsets likewise, only when a rule names one.
    const onSet = state.families.some((f) => f.ruleset.tables.some((t) => t.rules.some((r) => r.args.includes('--match-set'))));
    const ipsets = onSet ? await readIpsets(this.options.runner) : undefined;
    const pick = (f: Family) => {
      const t = findTable(state.families.find((x) => x.family === f)!.ruleset, 'filter');
      return t && (arrivals || ipsets) ? { ...t, ...(arrivals ? { arrivals } : {}), ...(ipsets ? { ipsets } : {}) } : t;
    };
    return { 4: pick(4), 6: pick(6) };
  }

  async describe(): Promise<FirewallDescription> {
    const state = await inspectBackend(this.backend, this.options.runner);
    const v4 = configFile(this.options.root, 4);
    const hasConfig = await access(v4).then(
      () => true,
      () => false,
    );
    return {
      kind: this.kind,
      manager: state.ufw ? 'ufw' : hasConfig ? 'netfilter-persistent' : 'none',
      active: state.active,
      tables: state.families.flatMap((f) => f.ruleset.tables.map((t) => `${familyName(f.family)} ${t.name}`)),
      configFile: hasConfig ? v4 : undefined,
      summary: [state.summary, hasConfig ? `config ${v4}` : 'no config file found'],
    };
  }

  async openings(): Promise<Opening[]> {
    const filters = await this.filters();
    const specs = FAMILIES.flatMap((f) => presentMarked(filters[f]).map((p) => p.spec)).filter((s): s is MarkedSpec => s !== null);
    return toOpenings(specs);
  }

  async ensure(openings: Opening[], refusals: Opening[], forwards: RouteForward[] = []): Promise<EnsureResult> {
    const r = await this.#ensureOpenings(openings, refusals);
    const routes = await this.ensureRoutes(forwards, true);
    if (!routes) return r;
    const refused = [...(r.refused ?? []), ...routes.refused];
    return { added: [...r.added, ...routes.added], removed: [...r.removed, ...routes.removed], ...(refused.length ? { refused } : {}) };
  }

  /** No route rule of meshp's stood after the last routes step that wanted none: a node that is no router reads nothing more. */
  #routesNone = false;

  /**
   * A router's forwarded paths (forward.ts): `found`, the accepts in FORWARD (adopted); always the
   * masquerade in nat POSTROUTING. One transaction per table and family, then read back.
   */
  async ensureRoutes(
    forwards: RouteForward[],
    found: boolean,
  ): Promise<{ added: string[]; removed: string[]; refused: { id: string; reason: string }[] } | null> {
    if (!forwards.length && this.#routesNone) return null;
    const plan = async () => {
      const saves = await readSaves(this.backend, this.options.runner);
      return FAMILIES.map((family) => {
        const rs = parseSave(saves[family]);
        return { family, edit: planRoutes(family, findTable(rs, 'filter'), findTable(rs, 'nat'), forwards, found) };
      });
    };
    const edits = await plan();
    const writes = edits.some((e) => e.edit.filter.length + e.edit.nat.length > 0);
    if (writes) {
      this.#noop = undefined;
      await this.#writing(async () => {
        for (const { family, edit } of edits) {
          if (edit.filter.length) await this.tools[family].restore(transaction(edit.filter, 'filter'));
          if (edit.nat.length) await this.tools[family].restore(transaction(edit.nat, 'nat'));
        }
      });
      const left = await plan();
      if (left.some((e) => e.edit.filter.length + e.edit.nat.length > 0)) {
        throw new MeshpError('MESHP_FIREWALL_FAILED', `${this.kind} accepted the route rules but the tables still differ`, { details: { left } });
      }
    }
    this.#routesNone = forwards.length === 0;
    const refused = [...new Map(edits.flatMap((e) => e.edit.refused).map((u) => [u.id, u])).values()].map((u) => ({
      id: u.id,
      reason: new MeshpError('MESHP_OPENING_UNPLACEABLE', `${u.id}: no place in ${this.kind} honours the found firewall: ${u.reason}`).oneLine(),
    }));
    const uniq = (xs: string[]) => [...new Set(xs)].sort();
    return { added: uniq(edits.flatMap((e) => e.edit.added)), removed: uniq(edits.flatMap((e) => e.edit.removed)), refused };
  }

  async #ensureOpenings(openings: Opening[], refusals: Opening[]): Promise<EnsureResult> {
    for (const o of [...openings, ...refusals]) {
      if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535) {
        throw new MeshpError('MESHP_FIREWALL_FAILED', `opening ${o.id}: port ${o.port} is not a port`);
      }
      if (/["\\\n]/.test(o.id) || o.id.length > 200) throw new MeshpError('MESHP_FIREWALL_FAILED', `opening id ${JSON.stringify(o.id)} cannot be a mark`);
    }
    const saves = await readSaves(this.backend, this.options.runner);
    for (const t of FAMILIES) this.tools[t].reads++;
    // The last no-op's answer while the saves' text and the ask are what it read, when it read
    // nothing beside them (no rule matched an interface or an ipset): no parse, no plan.
    const text = savesKey(saves);
    const asked = JSON.stringify([openings, refusals, this.options.privateRange ?? null]);
    if (this.#noop?.text === text && this.#noop.asked === asked && this.#noop.alone) {
      this.noopHits++;
      return structuredClone(this.#noop.result);
    }
    const filters = await this.filters(saves);
    // The last no-op's answer while the tables (with the routes and ipsets read beside them) and the ask are what it read.
    const read = tablesKey(filters, openings, refusals, this.options.privateRange);
    if (this.#noop?.read === read) {
      this.noopHits++;
      return structuredClone(this.#noop.result);
    }
    const wanted = { openings, refusals, privateRange: this.options.privateRange };
    // Plan every family before writing any, so a bad range fails before anything is applied.
    const unplaceable: Unplaceable[] = [];
    const specs = FAMILIES.map((f) => ({ family: f, specs: desiredSpecs(f, filters[f], wanted, unplaceable) }));
    // An opening one family leaves no place for is refused in both: nothing of it is written.
    const refusedIds = new Set(unplaceable.map((u) => u.id));
    const edits = specs.map(({ family: f, specs: s }) => ({
      family: f,
      edit: planEnsure(
        filters[f],
        s.filter((x) => !refusedIds.has(x.id)),
        f,
      ),
    }));
    const writes = edits.some((e) => e.edit.lines.length > 0);
    if (writes) await this.#writing(() => this.#apply(edits));
    const wantedIds = new Set([...openings, ...refusals].map((o) => o.id));
    const added = [...new Set(edits.flatMap((e) => e.edit.added.map((s) => s.id)))].sort();
    const removed = [...new Set(edits.flatMap((e) => e.edit.removed.map((s) => s.id)))].filter((id) => !wantedIds.has(id)).sort();
    const refused = [...new Map(unplaceable.map((u) => [u.id, u])).values()].map((u) => ({
      id: u.id,
      reason: new MeshpError('MESHP_OPENING_UNPLACEABLE', `opening ${u.id}: no place in ${this.kind} honours the found firewall: ${u.reason}`).oneLine(),
    }));
    const result = { added: added.filter((id) => !refusedIds.has(id)), removed, ...(refused.length ? { refused } : {}) };
    const alone = FAMILIES.every((f) => !filters[f]?.arrivals && !filters[f]?.ipsets);
    this.#noop = writes ? undefined : { read, text, asked, alone, result: structuredClone(result) };
    return result;
  }

  /**
   * The last ensure that found nothing to change, by what it read (tablesKey): an agent reconciles
   * every few seconds and nearly always finds its openings in place; the same tables and ask are
   * the same plan, so the next ensure that reads them answers without planning again (issue 31).
   */
  #noop: { read: string; text: string; asked: string; alone: boolean; result: EnsureResult } | undefined;
  /** How many ensures the last no-op answered (for the bench and tests). */
  noopHits = 0;

  async #apply(edits: { family: Family; edit: EnsureEdit }[]): Promise<void> {
    const done: { family: Family; edit: EnsureEdit }[] = [];
    for (const e of edits) {
      if (e.edit.lines.length === 0) continue;
      try {
        await this.tools[e.family].restore(transaction(e.edit.lines));
      } catch (err) {
        for (const d of done.reverse()) {
          await this.tools[d.family].restore(transaction(d.edit.inverse)).catch(() => undefined);
        }
        throw err;
      }
      done.push(e);
    }
  }

  /** Our own writes are not news to our watchers. */
  #writing<T>(write: () => Promise<T>): Promise<T> {
    return whileWriting(this.backend, this.options.runner, write);
  }

  /**
   * Loads the derived filter, unless the one this driver last loaded for the same filter is there
   * unchanged in both families: a converged node reconciles every few seconds, and its firewall is
   * left alone when nothing changed (a reload, a reboot or a hand edit makes it load again).
   */
  async loadDerived(filter: DerivedFilter): Promise<void> {
    return this.loadDerivedWithRoutes(filter);
  }

  async #loadDerivedOnly(filter: DerivedFilter): Promise<void> {
    const f = { ...filter, privateRange: filter.privateRange ?? this.options.privateRange };
    const key = JSON.stringify(f);
    const last = this.#derived;
    if (last?.key === key) {
      const now = await this.filters();
      if (FAMILIES.every((fam) => sameLines(derivedState(now[fam]), last.state[fam]))) return;
    }
    this.#derived = undefined;
    await this.#writing(() => loadDerived(this, f));
    const after = await this.filters();
    this.#derived = { key, state: { 4: derivedState(after[4]), 6: derivedState(after[6]) } };
  }

  /** The derived filter, then the masquerade (the same in both modes; a found chain's route accepts are not wanted here). */
  async loadDerivedWithRoutes(filter: DerivedFilter): Promise<void> {
    await this.#loadDerivedOnly(filter);
    await this.ensureRoutes(filter.forwards ?? [], false);
  }

  async unloadDerived(): Promise<void> {
    this.#derived = undefined;
    await this.#writing(() => unloadDerived(this));
  }

  async retire(): Promise<RetiredState> {
    return this.#writing(() => retire(this));
  }

  async reenable(state: RetiredState): Promise<void> {
    await this.#writing(() => reenable(this, state));
  }

  /** Each door's reach through the live filter tables (one read of each family; see reach.ts for what is counted). */
  async reachability(doors: Door[], options: { explain?: boolean } = {}): Promise<Reach[]> {
    return reachOfFilters(await this.filters(), doors, options.explain === true);
  }

  /**
   * Calls back when someone else changes the filter tables (a reload loses our rules): through
   * `nft monitor` for iptables-nft when the runner can start it, else by reading every 2 s.
   * Our own changes are not news. `close()` stops the monitor (by its pid) and the timers.
   */
  watch(onChange: () => void): { close(): void; readonly ready: Promise<void> } {
    return new IptablesWatcher(this.backend, this.options.runner, onChange, this.options.watch);
  }
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * What an ensure reads, as text: both families' filter tables as parsed (no counters: the parse
 * keeps the policies and rules), the routes and ipsets read beside them, and the ask.
 */
function tablesKey(filters: Record<Family, SavedTable | undefined>, openings: Opening[], refusals: Opening[], privateRange: string | undefined): string {
  return JSON.stringify([filters, openings, refusals, privateRange ?? null], (_k, v: unknown) =>
    typeof v === 'bigint' ? v.toString() : v instanceof Map ? [...(v as Map<unknown, unknown>).entries()] : v instanceof Set ? [...(v as Set<unknown>)] : v,
  );
}
