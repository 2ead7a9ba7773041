import { createHash, randomInt } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
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
import { ROUTE_MARK, ROUTE_TABLE, derivedAcceptLines, planRoutes } from './forward.js';
import { canonical, parseCidr } from './cidr.js';
import { DERIVED_TABLE, MARK, MESH_TABLE, RECEIPT_SET, classifyTable, markedId, tablesOwnedBy, foundActive } from './classify.js';
import { loadInScratch, ownerOf, recreateTables } from './config.js';
import { derivedBatch } from './derived.js';
import { nativePlan, receiptLines } from './native.js';
import { Nft, echoedReceipt, runTool } from './nft.js';
import { planEnsure, type Unplaceable } from './plan.js';
import { reachOfRuleset } from './reach.js';
import { matchesInterfaces, readArrivals } from './routes.js';
import type { Runner, Spawner } from './runner.js';
import { parseRuleset, tableKey, type NftObject, type NftTable, type Ruleset } from './schema.js';
import { parseShape } from './shape.js';
import { summarize } from './summary.js';
import { watchRuleset } from './watch.js';
import { NoopMemo, askedKey, routesKey } from './noop-memo.js';

/** Up to this many rules listed and written, a batch's receipt is read from nft's echo of it (see ensure). */
export const ECHO_MAX_RULES = 200;

export interface NftablesDriverOptions {
  /** Runs the tools (`unshare`, `systemctl`), and `nft` when `nftRunner` is not given. */
  runner: Runner;
  /** Runs `nft`: the plugin's libnftables runner (libnft.ts) by default. */
  nftRunner?: Runner;
  spawner: Spawner;
  /** The host's root prefix. */
  root: string;
  /** The found firewall's config file, inside the root. */
  configFile: string;
  bin?: string;
  /** The private network: refusals without `from` drop everything outside it. */
  privateRange?: string;
  /** A systemd unit to disable on retire and enable on re-enable; never stopped. Absent: left alone. */
  service?: string;
}

/** What `retire` records so `reenable` can bring the same firewall back. */
export interface NftablesRetired extends RetiredState {
  kind: 'nftables';
  configFile: string;
  configSha256: string | null;
  tables: string[];
  serviceDisabled: string | null;
  /**
   * The retired tables as they were live (every object of theirs, the mesh's marked rules left out):
   * the original, recorded before the tables are deleted, so a firewall loaded by hand with no config
   * file (or one whose file is gone since) comes back all the same.
   */
  live: NftObject[];
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

export class NftablesDriver implements FirewallDriver {
  readonly kind = 'nftables';
  readonly nft: Nft;
  readonly configPath: string;
  /** The derived table this driver last loaded: its batch, and its chains and rules as listed after. */
  #derived: { key: string; lines: string[] } | undefined;

  constructor(private readonly o: NftablesDriverOptions) {
    this.nft = new Nft(o.nftRunner ?? o.runner, o.bin);
    this.configPath = join(o.root, o.configFile);
  }

  async describe(): Promise<FirewallDescription> {
    const rs = await this.nft.list();
    const unit = join(this.o.root, 'etc/systemd/system/multi-user.target.wants/nftables.service');
    const found = tablesOwnedBy(rs, 'found');
    return {
      kind: this.kind,
      manager: (await exists(unit)) ? 'nftables.service' : found.length > 0 ? 'unmanaged' : 'none',
      active: foundActive(rs),
      tables: found.map(tableKey),
      configFile: (await exists(this.configPath)) ? this.configPath : undefined,
      summary: summarize(rs),
    };
  }

  async openings(): Promise<Opening[]> {
    return openingsOf(await this.nft.list());
  }

  /**
   * The live ruleset with the routes read beside it (routes.ts), for placing and walking: how
   * `iifname` is read. Read only when a rule matches an interface other than lo.
   */
  async #listedWithRoutes(text?: string): Promise<Ruleset & { routesRead?: string }> {
    const rs = parseRuleset(text ?? (await this.nft.listText()));
    if (!matchesInterfaces(rs)) return rs;
    const arrivals = await readArrivals(this.o.runner);
    return { ...rs, ...(arrivals ? { arrivals } : {}), routesRead: routesKey(arrivals) };
  }

  /** The last no-op ensure, by what it read: the next with the same ruleset and ask answers at once (noop-memo.ts). */
  readonly noop = new NoopMemo();

  async ensure(openings: Opening[], refusals: Opening[], forwards: RouteForward[] = []): Promise<EnsureResult> {
    const text = await this.nft.listText();
    const r = await this.#ensureOpenings(openings, refusals, text);
    // Nothing of a router's asked, and nothing of one in the ruleset as listed (the openings' batch writes none): no second read.
    if (!forwards.length && !text.includes(ROUTE_MARK) && !text.includes(`"${ROUTE_TABLE}"`)) this.#routesNone = true;
    const routes = await this.#ensureRoutes(forwards, true);
    if (!routes) return r;
    const refused = [...(r.refused ?? []), ...routes.refused];
    return { added: [...r.added, ...routes.added], removed: [...r.removed, ...routes.removed], ...(refused.length ? { refused } : {}) };
  }

  /** No route rule and no nat table of meshp's stood after the last routes step that wanted none: a node that is no router lists nothing more. */
  #routesNone = false;

  /**
   * A router's forwarded paths (forward.ts): `found`, marked accepts in the found forward chains
   * (adopted); else only the masquerade (converged: the accepts are the derived table's). One
   * transaction, then read back.
   */
  async #ensureRoutes(
    forwards: RouteForward[],
    found: boolean,
  ): Promise<{ added: string[]; removed: string[]; refused: { id: string; reason: string }[] } | null> {
    if (!forwards.length && this.#routesNone) return null;
    const plan = planRoutes(await this.#listedWithRoutes(), forwards, found);
    const refused = plan.refused.map((u) => ({
      id: u.id,
      reason: new MeshpError('MESHP_OPENING_UNPLACEABLE', `${u.id}: no place in nftables honours the found firewall: ${u.reason}`).oneLine(),
    }));
    if (plan.script) {
      this.noop.forget();
      await this.nft.applyFile(plan.script);
      const left = planRoutes(await this.#listedWithRoutes(), forwards, found);
      if (left.script)
        throw new MeshpError('MESHP_FIREWALL_FAILED', `nft accepted the route batch but the ruleset still differs`, { details: { left: left.script } });
    }
    this.#routesNone = forwards.length === 0;
    return { added: plan.added, removed: plan.removed, refused };
  }

  async #ensureOpenings(openings: Opening[], refusals: Opening[], text: string): Promise<EnsureResult> {
    const asked = askedKey(openings, refusals, this.o.privateRange);
    const same = await this.noop.answer(text, asked, async () => routesKey(await readArrivals(this.o.runner)));
    if (same) return same;
    const before = await this.#listedWithRoutes(text);
    const unplaceable: Unplaceable[] = [];
    const plan = planEnsure(before, openings, refusals, this.o.privateRange, unplaceable);
    const refused = unplaceable.map((u) => ({
      id: u.id,
      reason: new MeshpError('MESHP_OPENING_UNPLACEABLE', `opening ${u.id}: no place in nftables honours the found firewall: ${u.reason}`).oneLine(),
    }));
    const extra = refused.length ? { refused } : {};
    if (plan.head.length === 0 && plan.additions.length === 0) {
      const result = { added: [], removed: [], ...extra };
      this.noop.keep(text, asked, before.routesRead, result);
      return result;
    }
    this.noop.forget();
    const result = { added: plan.added, removed: plan.removed, ...extra };
    // Fast path: nft's own syntax, ending with a receipt — a fresh nonce in the mesh table's
    // receipt set. The batch is one transaction: the nonce is there afterwards only if all of it
    // committed (nft can exit 0 having applied nothing, docs/firewalls.md pitfall 5), and one set reads back in a
    // few milliseconds, however many rules the batch wrote.
    const nonce = plan.meshAfter ? freshNonce(before) : null;
    const script = nonce === null ? null : nativePlan(plan);
    // Into a small ruleset the batch is echoed (`nft -e`): the kernel echoes a batch to its sender
    // only once it has committed, so the receipt comes back in the same process. nft's echo reads
    // the whole ruleset first, though (about 65 µs a rule here, bench/found-opening): past
    // ECHO_MAX_RULES that costs more than a second process reading the receipt set alone.
    const echo = before.rules.length + plan.additions.length <= ECHO_MAX_RULES;
    const applied = nonce !== null && script !== null ? await this.nft.applyNative(script + receiptLines(nonce), echo) : false;
    if (nonce !== null && applied !== false) {
      if (typeof applied === 'string' && echoedReceipt(applied).includes(nonce)) return result;
      // Not echoed (or no echo asked): read the set, which also says what is there instead.
      const receipt = await this.nft.receipt();
      if (!receipt.includes(nonce)) {
        throw new MeshpError(
          'MESHP_FIREWALL_FAILED',
          `nft accepted the batch but its receipt ${nonce} is not in set inet ${MESH_TABLE} ${RECEIPT_SET}: the batch did not commit, or the ruleset changed since (a reload, another meshp process)`,
          { details: { receipt, expected: nonce } },
        );
      }
      return result;
    }
    // Otherwise (a batch that removes the mesh table with the last of our rules, or names nft's
    // syntax cannot carry): JSON, then re-list.
    await this.nft.apply({ nftables: plan.commands });
    const left = planEnsure(await this.#listedWithRoutes(), openings, refusals, this.o.privateRange);
    if (left.commands.length > 0) {
      throw new MeshpError('MESHP_FIREWALL_FAILED', `nft accepted the batch but the ruleset still differs (${left.commands.length} changes left)`, {
        details: { left: left.commands },
      });
    }
    return result;
  }

  /**
   * Loads the derived table, unless the one this driver last loaded for the same filter is there
   * unchanged: a converged node reconciles every few seconds, and its firewall is left alone when
   * nothing changed (a reload, a reboot or a hand edit of the table makes it load again).
   */
  async loadDerived(filter: DerivedFilter): Promise<void> {
    await this.#loadDerived(filter);
    // The masquerade stands in meshp's nat table in both modes; a found chain's route rules went with the retired tables.
    await this.#ensureRoutes(filter.forwards ?? [], false);
  }

  async #loadDerived(filter: DerivedFilter): Promise<void> {
    const batch = derivedBatch(filter);
    // A router's accepts (forward.ts), after the table's own rules: what the policy allows to the route groups' prefixes.
    const routes = derivedAcceptLines(filter.forwards ?? [], `inet ${DERIVED_TABLE} forward`).map(
      (l) => `add rule inet ${DERIVED_TABLE} forward ${l.body} comment ${JSON.stringify(l.comment)}`,
    );
    const key = JSON.stringify([batch, routes]);
    if (this.#derived?.key === key && sameLines(derivedLines(await this.nft.list()), this.#derived.lines)) return;
    this.#derived = undefined;
    await this.nft.apply({ nftables: batch });
    if (routes.length) await this.nft.applyFile(routes.join('\n') + '\n');
    const rs = await this.nft.list();
    if (!rs.tables.some((t) => classifyTable(t, rs) === 'derived')) {
      throw new MeshpError('MESHP_FIREWALL_FAILED', `nft accepted the batch but table inet ${DERIVED_TABLE} is not there`);
    }
    this.#derived = { key, lines: derivedLines(rs) };
  }

  async unloadDerived(): Promise<void> {
    this.#derived = undefined;
    const rs = await this.nft.list();
    if (!rs.tables.some((t) => classifyTable(t, rs) === 'derived')) return;
    await this.nft.apply({ nftables: [{ delete: { table: { family: 'inet', name: DERIVED_TABLE } } }] });
  }

  /** The config's tables (learnt in a scratch namespace), or null without a config file. */
  private async configTables(): Promise<{ rs: Ruleset; tables: NftTable[] } | null> {
    if (!(await exists(this.configPath))) return null;
    const rs = await loadInScratch(this.o.runner, this.o.bin ?? 'nft', this.configPath, this.o.root);
    return { rs, tables: tablesOwnedBy(rs, 'found') };
  }

  async retire(): Promise<NftablesRetired> {
    const liveRuleset = await this.nft.list();
    const config = await this.configTables();
    const found = tablesOwnedBy(liveRuleset, 'found');
    const fromConfig = config ? new Set(config.tables.map(tableKey)) : null;
    const targets = fromConfig ? found.filter((t) => fromConfig.has(tableKey(t))) : found;
    const bytes = config ? await readFile(this.configPath) : null;
    const keys = new Set(targets.map(tableKey));
    const live = liveRuleset.objects.filter((o) => {
      const kind = Object.keys(o)[0]!;
      const body = o[kind] as Record<string, unknown>;
      return keys.has(ownerOf(kind, body)) && !(kind === 'rule' && String(body.comment ?? '').startsWith(MARK));
    });
    await this.nft.apply({ nftables: targets.map((t) => ({ delete: { table: { family: t.family, name: t.name } } })) });
    const after = new Set((await this.nft.list()).tables.map(tableKey));
    const still = targets.filter((t) => after.has(tableKey(t)));
    if (still.length > 0) throw new MeshpError('MESHP_FIREWALL_FAILED', `tables still live after retire: ${still.map(tableKey).join(', ')}`);
    let serviceDisabled: string | null = null;
    if (this.o.service) {
      await runTool(this.o.runner, ['systemctl', 'disable', this.o.service], `systemctl disable ${this.o.service}`);
      serviceDisabled = this.o.service;
    }
    return {
      kind: 'nftables',
      configFile: this.configPath,
      configSha256: bytes ? createHash('sha256').update(bytes).digest('hex') : null,
      tables: targets.map(tableKey),
      serviceDisabled,
      live,
    };
  }

  async reenable(state: RetiredState): Promise<void> {
    const file = typeof state.configFile === 'string' ? state.configFile : this.configPath;
    const recorded = Array.isArray(state.live) && state.live.length > 0 ? (state.live as NftObject[]) : null;
    let config: Ruleset;
    if (await exists(file)) config = await loadInScratch(this.o.runner, this.o.bin ?? 'nft', file, this.o.root);
    // No config file to read (loaded by hand, or removed since): the tables as they were live when retired.
    else if (recorded) config = parseRuleset(JSON.stringify({ nftables: recorded }));
    else
      throw new MeshpError(
        'MESHP_FIREWALL_FAILED',
        `the retired firewall's config file ${file} is gone and no live copy was recorded; nothing to re-enable from`,
      );
    const tables = tablesOwnedBy(config, 'found');
    await this.nft.apply({ nftables: recreateTables(config, tables) });
    const live = new Set((await this.nft.list()).tables.map(tableKey));
    const missing = tables.filter((t) => !live.has(tableKey(t)));
    if (missing.length > 0) throw new MeshpError('MESHP_FIREWALL_FAILED', `tables not back after re-enable: ${missing.map(tableKey).join(', ')}`);
    if (typeof state.serviceDisabled === 'string') {
      await runTool(this.o.runner, ['systemctl', 'enable', state.serviceDisabled], `systemctl enable ${state.serviceDisabled}`);
    }
  }

  /** Each door's reach through the live ruleset, listed once (see reach.ts for what is counted). */
  async reachability(doors: Door[], options: { explain?: boolean } = {}): Promise<Reach[]> {
    return reachOfRuleset(await this.#listedWithRoutes(), doors, options.explain === true);
  }

  watch(onChange: () => void): { close(): void } {
    return watchRuleset(this.o.spawner, this.o.bin ?? 'nft', onChange);
  }
}

/** The derived table's chains and rules as comparable lines (handles and counter values left out). */
function derivedLines(rs: Ruleset): string[] {
  const strip = (o: object) => JSON.stringify(o, (k, v: unknown) => (k === 'handle' ? undefined : k === 'counter' && v && typeof v === 'object' ? {} : v));
  const ours = (o: { family: string; table: string }) => o.family === 'inet' && o.table === DERIVED_TABLE;
  return [...rs.chains.filter(ours).map((c) => `chain ${strip(c)}`), ...rs.rules.filter(ours).map((r) => `rule ${strip(r)}`)];
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A receipt nonce not already in the listed receipt set, so an old element never passes for a new batch. */
function freshNonce(rs: Ruleset): number {
  const old = new Set<unknown>();
  for (const o of rs.objects) {
    const set = (o as { set?: { family?: unknown; table?: unknown; name?: unknown; elem?: unknown } }).set;
    if (set?.family === 'inet' && set.table === MESH_TABLE && set.name === RECEIPT_SET && Array.isArray(set.elem)) set.elem.forEach((e) => old.add(e));
  }
  let nonce: number;
  do nonce = randomInt(1, 0x100000000);
  while (old.has(nonce));
  return nonce;
}

/** Our marked rules read back as openings and refusals, one per id. */
export function openingsOf(rs: Ruleset): Opening[] {
  const mine = new Set(rs.tables.filter((t) => ['found', 'mesh'].includes(classifyTable(t, rs))).map(tableKey));
  const hooks = new Map(rs.chains.map((c) => [`${tableKey(c)} ${c.name}`, c.hook]));
  const byId = new Map<string, { o: Opening; from: string[]; outsidePrivate: boolean }>();
  for (const rule of rs.rules) {
    const id = markedId(rule);
    if (id === null || !mine.has(tableKey(rule))) continue;
    const shape = parseShape(rule, id);
    const hook = hooks.get(`${tableKey(rule)} ${rule.chain}`);
    if (!shape || (hook !== 'input' && hook !== 'forward')) continue;
    let entry = byId.get(id);
    if (!entry) {
      const path = hook === 'input' ? 'incoming' : 'forwarded';
      entry = {
        o: { id, module: id.split('/')[0]!, port: shape.port, protocol: shape.protocol, from: [], path, action: shape.verdict },
        from: [],
        outsidePrivate: false,
      };
      byId.set(id, entry);
    }
    if (shape.negate) entry.outsidePrivate = true;
    else if (shape.cidrs.length > 0) entry.from.push(...shape.cidrs);
    else if (shape.nf !== 'any') entry.from.push(shape.nf === 'ip' ? '0.0.0.0/0' : '::/0');
  }
  return [...byId.values()].map(({ o, from, outsidePrivate }) => ({ ...o, from: outsidePrivate ? [] : canonical(from.map(parseCidr)) }));
}
