/**
 * The plugin contract: the hooks a plugin taps (`HostHooks`), what it is handed (`PluginHost`), and
 * the stages its taps are ordered by. What it may provide is in providers.ts, the plan and report
 * in plan.ts; the rest of the room (transport, wire, model, admin map, the controller's store seam)
 * sits beside them in core/src/contract/, and core/src/index.ts re-exports the room. It imports no
 * implementation.
 *
 * Versioned: a plugin states the contract it was written against (`apiVersion`),
 * and the host refuses one it does not speak.
 */
import type { AsyncParallelHook, AsyncSeriesBailHook, AsyncSeriesHook, AsyncSeriesWaterfallHook, SyncHook } from 'tapable';
import type { Transport } from './transport.js';
import type { ContainerRuntime, FileStore, FirewallDriver, FirewallProbe, HostStateStore, MachineFacts } from './providers.js';
import type { ApplyContext, HostReport, Plan, ViewChange } from './plan.js';

export const PLUGIN_API_VERSION = 1 as const;

/**
 * The stages a tap is ordered by, named per hook (tapable's `stage`: lower runs first; never
 * `before`). A hook not named here has no order among its taps that anyone relies on.
 */
export const STAGES = Object.freeze({
  /**
   * The firewall probe: a kind layered over another (ufw over iptables) records its sighting
   * before the base kind's plugin, which then leaves the layered kind's chains to it.
   */
  firewall: Object.freeze({ FIRST: -100, LAYERED: 0, BASE: 50, LAST: 100 }),
  /** The plan: resources are planned before openings, checks of the whole plan after both. */
  plan: Object.freeze({ FIRST: -100, RESOURCES: 0, OPENINGS: 10, CHECKS: 50, LAST: 100 }),
  /** The report: facts at the default stage; a tap that reads what others added, last. */
  report: Object.freeze({ FIRST: -100, FACTS: 0, LAST: 100 }),
} satisfies { readonly [H in keyof HostHooks]?: Readonly<Record<string, number>> });

export interface Plugin {
  readonly name: string;
  readonly apiVersion: typeof PLUGIN_API_VERSION;
  apply(host: PluginHost): void;
}

/**
 * Every extension point of a host, in one screen. Firewall plugins record what they see in the
 * probe; each provider hook has one provider (two are `MESHP_PROVIDER_TWICE`); the rest are taps.
 */
export interface HostHooks {
  /** Each firewall plugin records what it sees in the probe, with a driver when it speaks it. */
  readonly firewall: AsyncSeriesHook<[FirewallProbe]>;
  /** One provider each. */
  readonly files: AsyncSeriesBailHook<[HostOptions], FileStore | undefined>;
  readonly runtime: AsyncSeriesBailHook<[HostOptions], ContainerRuntime | undefined>;
  readonly state: AsyncSeriesBailHook<[HostOptions], HostStateStore | undefined>;
  /** How the agent reaches its controller and the controller serves its agents. */
  readonly transport: AsyncSeriesBailHook<[HostOptions], Transport | undefined>;
  readonly facts: AsyncSeriesBailHook<[HostOptions], MachineFacts | undefined>;
  /** Plugins may add actions to the plan (they come with their own `run`). */
  readonly plan: AsyncSeriesWaterfallHook<[Plan, ApplyContext]>;
  /** A plugin may veto the whole plan with a reason (a string). */
  readonly beforeApply: AsyncSeriesBailHook<[Plan, ApplyContext], string | undefined>;
  readonly afterApply: AsyncParallelHook<[HostReport, ApplyContext]>;
  /** Plugins add facts to the node's report. */
  readonly report: AsyncSeriesWaterfallHook<[HostReport]>;
  /** The peers upserted, removed and unscoped by a delta, and the components that changed. */
  readonly viewChanged: SyncHook<[ViewChange]>;
  /**
   * The node leaves its network (removed by the controller, or `meshp agent leave`): each plugin
   * takes away what it added to the machine outside the firewall driver (a tunnel: its process, its
   * interface, its own table) and says so; never a found thing. `preview`: it only says.
   */
  readonly leave: AsyncSeriesHook<[Leaving]>;
}

/** What a `leave` tap is handed: say each thing removed (or, in a preview, to be removed) in `removed`, each left in place in `kept`. */
export interface Leaving {
  readonly preview: boolean;
  readonly removed: string[];
  readonly kept: string[];
}

/** What a plugin is handed: the hooks to tap, the host's options, and the parts other plugins provide. */
export interface PluginHost {
  readonly hooks: HostHooks;
  readonly options: HostOptions;
  files(): Promise<FileStore | null>;
  runtime(): Promise<ContainerRuntime | null>;
  facts(): Promise<MachineFacts | null>;
  transport(): Promise<Transport>;
  state(): Promise<HostStateStore>;
  firewall(): Promise<FirewallDriver | null>;
}

/** What a host was started with: the same options whether it runs as agent or as `meshp host`. */
export interface HostOptions {
  /** Prefix of every path the host reads or writes on the machine. Default "/". */
  root: string;
  /** The host's state folder. */
  stateDir: string;
  /** "auto" (detect) or a firewall kind to insist on. */
  firewall: string;
  /** Path of the container engine's socket. */
  dockerSocket?: string;
  /** Extra options for plugins, by plugin name. */
  pluginOptions?: Record<string, unknown>;
}
