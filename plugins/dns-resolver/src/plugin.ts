/**
 * The mesh's names on every node (issue 25): a resolver on the node's mesh address (UDP and TCP 53)
 * that answers the mesh's domain from the node's view — its peers by name, its own name, the DNS
 * component's records — and forwards every other name: a split domain to its own nameservers, the
 * rest to the component's nameservers or, with none, to the resolvers the machine already uses (read
 * from its resolver configuration). Its table follows the view at each delta, so a peer the policy
 * hides or the controller removes has no name from that delta on. The machine's own resolver is
 * told of it through its manager, or held (machine.ts).
 */
import { PLUGIN_API_VERSION, type Action, type Plan, type Plugin, type PluginHost, type ResolverReport, type ViewChange } from '@meshp/core';
import { oneLine, usage } from '@meshp/core/util';
import { parseNameserver } from '@meshp/core/schema';
import { answerMesh, decodeQuery, failure, rcodeOf, type Outcome } from './answer.js';
import { forward, type Upstream } from './forward.js';
import type { ManagerCommands } from './integrate.js';
import { MachineResolver } from './machine.js';
import type { Runner } from './run.js';
import { NAMED_COMPONENTS, inDomain, nameTable, patchTable, type NameTable, type NamedView } from './names.js';
import { meshRange, withDnsOpenings } from './opening.js';
import { foundNameservers, resolvConfPath } from './resolv-conf.js';
import { listen, type Listening } from './server.js';

export const DEFAULT_DNS_PORT = 53;

export interface ResolverLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

export interface DnsResolverOptions {
  /** The port on the mesh address. Default 53. */
  port?: number;
  /** Where the machine's resolver configuration is read (default: the host's root + /etc/resolv.conf). */
  root?: string;
  /** The address to listen on, instead of the tunnel's (tests). */
  listenAddress?: string;
  /** The private range, when the declaration does not carry one: the openings' source. */
  privateRange?: string;
  /** Each upstream's time to answer. */
  forwardTimeoutMs?: number;
  /** The tunnel's interface: the link the machine's resolver manager is told of. Without one, nothing is integrated. */
  interface?: string;
  /** The manager's commands (default: resolvectl, resolvconf on PATH) and how they are run. */
  commands?: Partial<ManagerCommands>;
  runner?: Runner;
  log?: ResolverLog;
}

/** What a report carries (core's ResolverReport: where it answers, where the rest go, its last errors), and more for status and /metrics. */
export interface DnsResolverStatus extends ResolverReport {
  splits: string[];
  appliedVersion: number;
  answers: Record<Outcome, number>;
}

const SILENT: ResolverLog = { info() {}, warn() {} };
const zero = (): Record<Outcome, number> => ({ answered: 0, nodata: 0, nxdomain: 0, forwarded: 0, servfail: 0, refused: 0, malformed: 0 });
const text = (u: Upstream) => (u.port === 53 ? u.address : u.address.includes(':') ? `[${u.address}]:${u.port}` : `${u.address}:${u.port}`);
const upstreamsOf = (list: readonly string[]): Upstream[] => list.map(parseNameserver).filter((u): u is Upstream => u !== null);

export class DnsResolverPlugin implements Plugin {
  readonly name = 'dns-resolver';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly #o: DnsResolverOptions & { port: number };
  readonly #log: ResolverLog;
  #root = '/';
  readonly #machine: MachineResolver;
  #view: (NamedView & { readonly version: number }) | null = null;
  #table: NameTable = { domain: '', names: new Map(), records: new Map() };
  #listening: Listening | null = null;
  #chain: Promise<void> = Promise.resolve();
  #applied = 0;
  #lastError: string | null = null;
  #lastAnswerError = '';
  #queries = 0;
  #answers = zero();
  #closed = false;

  constructor(options: DnsResolverOptions = {}) {
    const port = options.port ?? DEFAULT_DNS_PORT;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw usage(`dns port ${port}: a port 0..65535 (0: any, for tests)`);
    this.#o = { ...options, port };
    this.#log = options.log ?? SILENT;
    this.#machine = new MachineResolver({
      log: this.#log,
      ...(options.interface ? { interface: options.interface } : {}),
      ...(options.commands ? { commands: options.commands } : {}),
      ...(options.runner ? { runner: options.runner } : {}),
    });
  }

  apply(host: PluginHost): void {
    this.#root = this.#o.root ?? host.options.root;
    this.#machine.bind(host, this.#root);
    host.hooks.viewChanged.tap(this.name, (change) => {
      if (this.#view) this.#enqueue(() => this.#sync(change));
    });
    host.hooks.plan.tapPromise(this.name, async (plan, ctx) => {
      // A member's declaration carries no private range (genesis's does): its tunnel's address carries the prefix.
      const opened = withDnsOpenings(plan, ctx.declaration.settings, this.#o.port, this.#o.privateRange ?? meshRange(this.#view?.components.tunnel?.address));
      const file = await this.#fileAction(opened);
      return file ? { ...opened, actions: [...opened.actions, file] } : opened;
    });
    host.hooks.report.tapPromise(this.name, async (report) => ({ ...report, facts: { ...report.facts, dns: this.status() } }));
    host.hooks.leave.tapPromise(this.name, async (leaving) => {
      // Not attached (`meshp agent leave`, the agent stopped): no resolver here to speak of.
      if (this.#view)
        leaving.removed.push(`the mesh's resolver on ${this.#listening ? `${this.#listening.address}:${this.#listening.port}` : 'the mesh address'}`);
      // Not attached: an entry an agent killed before it could take it away.
      const left = this.#view ? null : await this.#machine.forget(leaving.preview);
      if (left) leaving.removed.push(left);
      const entry = this.#machine.entry;
      const file = await this.#machine.restoreFile(leaving.preview);
      if (file) leaving.removed.push(file);
      if (leaving.preview) {
        if (entry) leaving.removed.push(entry);
        return;
      }
      const removed = await this.#shutdown();
      if (removed) leaving.removed.push(removed);
    });
  }

  /** Answers from the view as it is, then follows its changes. */
  attach(view: NamedView & { readonly version: number }): Promise<void> {
    this.#view = view;
    this.#enqueue(() => this.#sync());
    return this.settled();
  }

  /**
   * The last change followed. Not answering yet — the mesh address was not up when the view came (the
   * tunnel follows the same delta on its own chain) or the port was taken — the sockets are asked for
   * again first: the agent waits here before each reconcile, after the tunnel, so a failed bind is
   * retried once the address is there instead of waiting for a view that may not change again.
   */
  settled(): Promise<void> {
    if (this.#view && !this.#listening && !this.#closed && this.#lastError !== null) this.#enqueue(() => this.#sync());
    return this.#chain;
  }

  async close(): Promise<void> {
    await this.#shutdown();
  }

  /** Stops answering; the manager's entry taken away first (it would name a resolver that no longer answers). What was removed, if anything. */
  async #shutdown(): Promise<string | null> {
    this.#closed = true;
    await this.#chain;
    const removed = await this.#machine.unlink();
    await this.#listening?.close();
    this.#listening = null;
    return removed;
  }

  status(): DnsResolverStatus {
    const { list, from } = this.#upstreams('');
    return {
      address: this.#listening?.address ?? '',
      port: this.#listening?.port ?? 0,
      domain: this.#table.domain,
      names: this.#table.names.size,
      upstreams: list.map(text),
      upstreamsFrom: from,
      splits: (this.#view?.components.dns?.splits ?? []).map((s) => s.domain),
      appliedVersion: this.#applied,
      lastError: this.#lastError,
      lastAnswerError: this.#lastAnswerError,
      queries: this.#queries,
      manager: this.#machine.manager,
      ...this.#machine.integration,
      answers: { ...this.#answers },
    };
  }

  /** Whether a name (any case, with or without its trailing dot) is one this node answers: for tests and doctor. */
  holds(name: string): boolean {
    return this.#table.names.has(name.toLowerCase().replace(/\.$/, ''));
  }

  #enqueue(fn: () => Promise<void>): void {
    this.#chain = this.#chain.then(async () => {
      if (this.#closed) return;
      try {
        await fn();
        this.#lastError = null;
      } catch (e) {
        // Said once per cause: a retry that fails the same way (before each reconcile) is not news.
        const err = oneLine(e);
        if (err !== this.#lastError) this.#log.warn({ err }, 'dns resolver not answering');
        this.#lastError = err;
      }
    });
  }

  /** The table from the view (patched, when only peers changed); the sockets (re)bound on the mesh address when it moved. */
  async #sync(change?: ViewChange): Promise<void> {
    const view = this.#view!;
    if (change && change.fromVersion > 0 && this.#applied > 0 && !change.components.some((c) => NAMED_COMPONENTS.includes(c)))
      patchTable(this.#table, view, [...change.upserted, ...change.removed, ...change.unscoped]);
    else this.#table = nameTable(view);
    this.#applied = view.version;
    const address = this.#o.listenAddress ?? (view.components.tunnel?.address ?? '').replace(/\/\d+$/, '');
    if (!address) throw new Error('no mesh address yet: the view has no tunnel component');
    if (this.#listening?.address !== address) {
      await this.#machine.unlink();
      await this.#listening?.close();
      this.#listening = null;
      this.#listening = await listen(address, this.#o.port, (q, tcp) => this.#answer(q, tcp));
      this.#log.info({ address, port: this.#listening.port, domain: this.#table.domain, names: this.#table.names.size }, 'dns resolver answering');
    }
    await this.#machine.integrate(address, this.#listening.port, this.#table.domain, view.components.dns?.searchDomains ?? []);
  }

  /** The file action of the plan: the mesh's resolver on port 53 is what a resolv.conf can name. */
  async #fileAction(plan: Plan): Promise<Action | null> {
    const l = this.#listening;
    const want = l && l.port === 53 ? { address: l.address, domain: this.#table.domain, searchDomains: this.#view?.components.dns?.searchDomains ?? [] } : null;
    return this.#machine.fileAction(plan, want);
  }

  /** Where a name outside the mesh goes: the longest split domain it is under, else the component's nameservers, else the found ones. */
  #upstreams(name: string): { list: Upstream[]; from: DnsResolverStatus['upstreamsFrom'] } {
    const dns = this.#view?.components.dns;
    const n = name.toLowerCase().replace(/\.$/, '');
    const split = (dns?.splits ?? []).filter((s) => n === s.domain || n.endsWith(`.${s.domain}`)).sort((a, b) => b.domain.length - a.domain.length)[0];
    if (split) return { list: upstreamsOf(split.nameservers), from: 'component' };
    if (dns?.nameservers.length) return { list: upstreamsOf(dns.nameservers), from: 'component' };
    // Never itself: a found configuration naming the mesh address would loop.
    const self = this.#listening;
    const found = foundNameservers(this.#root).filter((u) => !(self && u.address === self.address && u.port === self.port));
    return { list: found, from: found.length ? 'found' : 'none' };
  }

  async #answer(raw: Buffer, tcp: boolean): Promise<Buffer | null> {
    this.#queries++;
    const query = decodeQuery(raw);
    const q = query?.questions?.[0];
    if (!query || !q) {
      this.#answers.malformed++;
      return tcp ? failure(raw) : null;
    }
    if (inDomain(this.#table, q.name)) {
      const a = answerMesh(this.#table, query);
      this.#answers[a.outcome]++;
      return a.bytes;
    }
    try {
      const out = await forward(this.#upstreams(q.name).list, raw, { tcp, ...(this.#o.forwardTimeoutMs ? { timeoutMs: this.#o.forwardTimeoutMs } : {}) });
      this.#answers[rcodeOf(out) === 'SERVFAIL' ? 'servfail' : 'forwarded']++;
      return out;
    } catch (e) {
      this.#lastAnswerError = `${q.name}: ${oneLine(e)}`;
      this.#answers.servfail++;
      return failure(raw);
    }
  }
}

export { resolvConfPath };
