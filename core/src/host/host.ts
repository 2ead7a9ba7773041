import { AsyncParallelHook, AsyncSeriesBailHook, AsyncSeriesHook, AsyncSeriesWaterfallHook, SyncHook } from 'tapable';
import { PLUGIN_API_VERSION, type HostOptions, type HostHooks, type Leaving, type PluginHost, type Plugin } from '../contract/plugin.js';
import {
  type ContainerRuntime,
  type FileStore,
  type FirewallDriver,
  type FirewallProbe,
  type FirewallSighting,
  type HostStateStore,
  type MachineFacts,
} from '../contract/providers.js';
import { type ApplyContext, type HostReport, type Plan, type ViewChange } from '../contract/plan.js';
import { MeshpError, attribute, internal } from '../errors.js';
import { providerMissing } from '../conditions.js';
import type { Transport } from '../contract/transport.js';
import { attributed, attributeTaps, invokeTap, type AnyTap } from './plugin-boundary.js';

function createHooks(): HostHooks {
  return attributeTaps<HostHooks>({
    firewall: new AsyncSeriesHook<[FirewallProbe]>(['probe'], 'firewall'),
    files: new AsyncSeriesBailHook<[HostOptions], FileStore | undefined>(['options'], 'files'),
    runtime: new AsyncSeriesBailHook<[HostOptions], ContainerRuntime | undefined>(['options'], 'runtime'),
    state: new AsyncSeriesBailHook<[HostOptions], HostStateStore | undefined>(['options'], 'state'),
    transport: new AsyncSeriesBailHook<[HostOptions], Transport | undefined>(['options'], 'transport'),
    facts: new AsyncSeriesBailHook<[HostOptions], MachineFacts | undefined>(['options'], 'facts'),
    plan: new AsyncSeriesWaterfallHook<[Plan, ApplyContext]>(['plan', 'context'], 'plan'),
    beforeApply: new AsyncSeriesBailHook<[Plan, ApplyContext], string | undefined>(['plan', 'context'], 'beforeApply'),
    afterApply: new AsyncParallelHook<[HostReport, ApplyContext]>(['report', 'context'], 'afterApply'),
    report: new AsyncSeriesWaterfallHook<[HostReport]>(['report'], 'report'),
    viewChanged: new SyncHook<[ViewChange]>(['change'], 'viewChanged'),
    leave: new AsyncSeriesHook<[Leaving]>(['leaving'], 'leave'),
  });
}

/** The hooks, as declared in the contract (`HostHooks`). */
export type Hooks = HostHooks;

/** The parts one plugin provides, each through its own hook. */
type ProviderName = 'files' | 'runtime' | 'facts' | 'transport' | 'state';
type Provided<K extends ProviderName> = Exclude<Awaited<ReturnType<Hooks[K]['promise']>>, undefined>;

const DEFAULTS: HostOptions = { root: '/', stateDir: '/var/lib/meshp', firewall: 'auto' };

/**
 * The plugin host. Build it, `use` every plugin, then run. Hooks are built once per host:
 * tapable has no untap.
 */
export class Host implements PluginHost {
  readonly hooks: Hooks = createHooks();
  readonly options: HostOptions;
  readonly plugins: string[] = [];
  readonly #provided = new Map<ProviderName, Promise<unknown>>();
  #firewall?: { driver: FirewallDriver | null; probe: FirewallProbe };

  constructor(options: Partial<HostOptions> = {}) {
    this.options = Object.freeze({ ...DEFAULTS, ...options });
  }

  use(...plugins: Plugin[]): this {
    for (const plugin of plugins) {
      if (!plugin || typeof plugin.name !== 'string' || typeof plugin.apply !== 'function') {
        throw new MeshpError('MESHP_PLUGIN_INVALID', 'a plugin needs a name and an apply(host) function');
      }
      if (plugin.apiVersion !== PLUGIN_API_VERSION) {
        throw new MeshpError(
          'MESHP_PLUGIN_INVALID',
          `plugin ${plugin.name} speaks contract ${String(plugin.apiVersion)}; this host speaks ${PLUGIN_API_VERSION}`,
        );
      }
      if (this.plugins.includes(plugin.name)) {
        throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${plugin.name} is used twice`);
      }
      try {
        plugin.apply(this);
      } catch (e) {
        throw attribute(e, plugin.name, 'apply');
      }
      this.plugins.push(plugin.name);
    }
    return this;
  }

  /**
   * Calls a hook. Each tap is wrapped when it is registered, so a plugin's failure arrives already
   * naming its plugin and hook; anything else raised here is core's own (`MESHP_INTERNAL`).
   */
  async call<R>(hook: { name: string | undefined }, run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (e) {
      if (e instanceof MeshpError) throw e;
      throw internal(e, `hook ${hook.name ?? '?'}`);
    }
  }

  /**
   * The one provider a plugin gave for a part, asked once per host; null when no plugin gives it.
   * Every tap is asked: two plugins that both answer are refused (`MESHP_PROVIDER_TWICE`), never a
   * silent first-wins. What is provided is wrapped so its errors name the plugin and the method.
   */
  #provide<K extends ProviderName>(name: K): Promise<Provided<K> | null> {
    let p = this.#provided.get(name) as Promise<Provided<K> | null> | undefined;
    if (!p) {
      const hook = this.hooks[name] as unknown as { taps: AnyTap[] };
      p = (async () => {
        const answers: { plugin: string; value: Provided<K> }[] = [];
        for (const tap of hook.taps) {
          const value = (await invokeTap(tap, [this.options])) as Provided<K> | undefined;
          if (value !== undefined && value !== null) answers.push({ plugin: tap.name, value });
        }
        if (answers.length > 1) {
          throw new MeshpError('MESHP_PROVIDER_TWICE', `${answers.map((a) => a.plugin).join(' and ')} each provide ${name}; load one of them`, {
            details: { part: name, plugins: answers.map((a) => a.plugin) },
          });
        }
        const one = answers[0];
        return one ? attributed(one.value, one.plugin, name) : null;
      })();
      p.catch(() => this.#provided.delete(name));
      this.#provided.set(name, p);
    }
    return p;
  }

  async #require<K extends ProviderName>(name: K, what: string): Promise<Provided<K>> {
    const v = await this.#provide(name);
    if (!v) throw providerMissing(what);
    return v;
  }

  files(): Promise<FileStore | null> {
    return this.#provide('files');
  }

  runtime(): Promise<ContainerRuntime | null> {
    return this.#provide('runtime');
  }

  facts(): Promise<MachineFacts | null> {
    return this.#provide('facts');
  }

  transport(): Promise<Transport> {
    return this.#require('transport', 'the transport');
  }

  state(): Promise<HostStateStore> {
    return this.#require('state', 'the host state store');
  }

  /**
   * The firewall found on the machine. Null when no firewall plugin is loaded at all.
   * An active firewall that no plugin answers for is refused, naming what was seen.
   */
  async firewall(): Promise<FirewallDriver | null> {
    if (this.#firewall === undefined) {
      const probe: FirewallProbe = { requested: this.options.firewall, root: this.options.root, seen: [] };
      if (this.hooks.firewall.taps.length === 0) {
        this.#firewall = { driver: null, probe };
        return null;
      }
      await this.call(this.hooks.firewall, () => this.hooks.firewall.promise(probe));
      for (const s of probe.seen) if (s.driver) s.driver = attributed(s.driver, s.by, 'firewall');
      this.#firewall = { driver: chooseFirewall(probe), probe };
    }
    return this.#firewall.driver;
  }

  /** What the firewall plugins saw at the last probe. */
  firewallSightings(): FirewallSighting[] {
    return this.#firewall?.probe.seen.map(({ driver: _d, ...s }) => s) ?? [];
  }

  async close(): Promise<void> {
    const state = this.#provided.get('state') as Promise<HostStateStore | null> | undefined;
    await (await state?.catch(() => null))?.close();
  }
}

/** The machine has no active firewall: nothing to open, nothing to retire. */
export const NO_FIREWALL: FirewallDriver = Object.freeze({
  kind: 'none',
  async describe() {
    return { kind: 'none', manager: 'none', active: false, tables: [], summary: ['no active firewall'] };
  },
  async openings() {
    return [];
  },
  async ensure(_openings, refusals) {
    if (refusals.length > 0) {
      throw new MeshpError('MESHP_FIREWALL_FAILED', 'refusals need a firewall plugin that can hold a table; none answered');
    }
    return { added: [], removed: [] };
  },
  async loadDerived() {
    throw new MeshpError('MESHP_FIREWALL_UNKNOWN', 'no firewall plugin answered; the derived filter cannot be loaded');
  },
  async unloadDerived() {},
  async retire() {
    return {};
  },
  async reenable() {},
  async reachability(doors) {
    // No firewall: every door is open from anywhere, and no rule mentions it.
    return doors.map((d) => ({ port: d.port, protocol: d.protocol, path: d.path, now: 'open' as const, mentioned: false }));
  },
} satisfies FirewallDriver);

function describeSightings(seen: FirewallSighting[]): string {
  return seen.map((s) => `${s.kind} (${s.summary})`).join('; ') || 'nothing';
}

/** The kind asked for; else the one active kind; else a kind present but idle; else none. Never a guess. */
export function chooseFirewall(probe: FirewallProbe): FirewallDriver {
  const { seen, requested } = probe;
  if (requested !== 'auto') {
    const match = seen.find((s) => s.kind === requested && s.driver);
    if (match?.driver) return match.driver;
    if (requested === 'none' && !seen.some((s) => s.active)) return NO_FIREWALL;
    throw new MeshpError(
      'MESHP_FIREWALL_UNKNOWN',
      `firewall kind ${requested} was asked for and no loaded plugin speaks it here; seen: ${describeSightings(seen)}`,
      {
        details: { seen: seen.map(({ driver: _d, ...s }) => s) },
      },
    );
  }
  const active = seen.filter((s) => s.active);
  const kinds = [...new Set(active.map((s) => s.kind))];
  if (active.some((s) => !s.driver)) {
    throw new MeshpError('MESHP_FIREWALL_UNKNOWN', `no loaded plugin speaks the active firewall; seen: ${describeSightings(active)}`, {
      details: { seen: active.map(({ driver: _d, ...s }) => s) },
    });
  }
  if (kinds.length > 1) {
    throw new MeshpError(
      'MESHP_FIREWALL_UNKNOWN',
      `several firewalls are active (${kinds.join(', ')}); name one with --firewall KIND; seen: ${describeSightings(active)}`,
      {
        details: { seen: active.map(({ driver: _d, ...s }) => s) },
      },
    );
  }
  if (active.length > 0) return active[0]!.driver!;
  const idle = seen.find((s) => s.driver);
  return idle?.driver ?? NO_FIREWALL;
}
