/**
 * A router's forwarding (issue 26, ADR 0032): `net.ipv4.ip_forward` and `net.ipv6.conf.all.forwarding`
 * are settings of a machine in use, found like `/etc/resolv.conf` (dns-resolver's managed-file.ts).
 *
 * - Read on every plan of a via node, and shown in it: one action per sysctl its served prefixes need
 *   (v4 for a v4 prefix, v6 for a v6 one), keyed by its /proc/sys path.
 * - Adopted (and no `routing` module taken): never changed. Found on, it is held as found; found off,
 *   it is held and the agent warns once: the node stays a via node that forwards nothing until the
 *   operator turns it on or converges the node (what Tailscale does: it warns, it never flips it).
 * - Converged (or the `routing` module taken): found off, its value is recorded in the host's state
 *   first, then it is turned on; the change is in the plan the flip previews, and in the route
 *   preview on the controller (the via node's reported value).
 * - When the node serves no group any more, returns to adopted, or leaves, what was recorded is put
 *   back — only where the value is still the one meshp wrote (another's change since is left alone).
 * - IPv6 forwarding on makes the kernel ignore router advertisements where `accept_ra` is 1: a machine
 *   whose IPv6 default route came from one (SLAAC) would lose it when the route lapses. Where an
 *   interface with `accept_ra` 1 has a route learned from an advertisement, IPv6 forwarding is not
 *   turned on: it is held, saying which interface and what to set (`accept_ra` 2 keeps them coming).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { resourceKey, type Action, type ApplyContext, type HostStateStore, type Plan } from '@meshp/core';
import { oneLine } from '@meshp/core/util';
import { run } from './exec.js';

export const IPV4_FORWARD = 'net.ipv4.ip_forward';
export const IPV6_FORWARD = 'net.ipv6.conf.all.forwarding';
export const FORWARD_SYSCTLS = [IPV4_FORWARD, IPV6_FORWARD] as const;
/** The host state's value holding the originals until they are put back. */
export const FORWARDING_KEY = 'routing.forwarding.original';
/** The module a router's forwarding belongs to: taken on an adopted node, meshp may change it there too. */
export const ROUTING_MODULE = 'routing';

/** Reads and writes a sysctl by its dotted name; null: the machine has none (IPv6 disabled). */
export interface Sysctl {
  read(name: string): Promise<string | null>;
  write(name: string, value: string): Promise<void>;
}

export const sysctlPath = (name: string): string => `/proc/sys/${name.replace(/\./g, '/')}`;

/** The process's own network namespace's sysctls, through /proc/sys (under `root`, for tests). */
export function procSysctl(root = '/proc/sys'): Sysctl {
  const path = (name: string) => join(root, ...name.split('.'));
  return {
    read: async (name) => (await readFile(path(name), 'utf8').catch(() => null))?.trim() ?? null,
    write: (name, value) => writeFile(path(name), `${value}\n`),
  };
}

/**
 * The interfaces that have a route learned from a router advertisement (`proto ra`): their IPv6
 * default route (and prefix routes) lapse once the kernel stops taking advertisements there.
 */
export type RaLearned = () => Promise<string[]>;

/** `ip -6 -j route show proto ra` in the process's own network namespace: each route's device, once. */
export const ipRaLearned: RaLearned = async () => {
  const text = await run('ip', ['-6', '-j', 'route', 'show', 'proto', 'ra']).catch(() => '[]');
  let routes: { dev?: string }[];
  try {
    routes = JSON.parse(text.trim() || '[]') as { dev?: string }[];
  } catch {
    // Not JSON (an `ip` without -j): nothing can be said learned, as with no IPv6 at all.
    return [];
  }
  return [...new Set((Array.isArray(routes) ? routes : []).map((r) => r.dev).filter((d): d is string => !!d))];
};

/** The originals, and which of them meshp changed (to what). */
export interface ForwardingRecord {
  original: Record<string, string>;
  wrote: Record<string, string>;
  at: string;
}

export interface ForwardingStatus {
  /** none: not a router (or not read yet); found-on: a router whose forwarding was on as found; held: off on an adopted node, not changed; owned: turned on by meshp, its original recorded. */
  state: 'none' | 'found-on' | 'held' | 'owned';
  /** Each forwarding sysctl's value now ('' when the machine has none). */
  values: Record<string, string>;
  /** What was recorded before meshp changed it; {} when nothing was. */
  original: Record<string, string>;
  reason: string;
  /** The sysctls the served prefixes need on ([]: not a router). */
  needed: string[];
}

/** The sysctls the served prefixes need on: v4 for any v4 prefix, v6 for any v6 one. */
export function neededSysctls(prefixes: readonly string[]): string[] {
  const out: string[] = [];
  if (prefixes.some((p) => !p.includes(':'))) out.push(IPV4_FORWARD);
  if (prefixes.some((p) => p.includes(':'))) out.push(IPV6_FORWARD);
  return out;
}

const said = (values: Record<string, string>, names: readonly string[]) => names.map((n) => `${n}=${values[n] ?? ''}`).join(', ');

interface Planning {
  values: Record<string, string>;
  base: (name: string) => Pick<Action, 'key' | 'kind' | 'module' | 'by'>;
  prefixes: readonly string[];
  recorded: ForwardingRecord | null;
  say: (s: Omit<ForwardingStatus, 'needed'>) => void;
}

export interface ForwardingLog {
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

const raReason = (devs: readonly string[]): string =>
  `${IPV6_FORWARD} not turned on: it would make the kernel ignore the router advertisements ${devs.join(', ')} takes IPv6 routes from (accept_ra=1), and the default route learned from them would lapse; set ${devs.map((d) => `net.ipv6.conf.${d}.accept_ra=2`).join(' and ')} first (then it is turned on), or serve no IPv6 prefix from this node`;

export class RouterForwarding {
  readonly #sysctl: Sysctl;
  readonly #log: ForwardingLog;
  #status: ForwardingStatus = { state: 'none', values: {}, original: {}, reason: 'not a router', needed: [] };
  #warned = '';

  readonly #raLearned: RaLearned;

  constructor(sysctl: Sysctl, log: ForwardingLog, raLearned: RaLearned = ipRaLearned) {
    this.#sysctl = sysctl;
    this.#log = log;
    this.#raLearned = raLearned;
  }

  /** The interfaces whose advertisements IPv6 forwarding would stop: a route learned from one, `accept_ra` 1. */
  async #wouldLoseRa(): Promise<string[]> {
    const out: string[] = [];
    for (const dev of await this.#raLearned()) if ((await this.#sysctl.read(`net.ipv6.conf.${dev}.accept_ra`)) === '1') out.push(dev);
    return out;
  }

  get status(): ForwardingStatus {
    return this.#status;
  }

  async #values(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const n of FORWARD_SYSCTLS) out[n] = (await this.#sysctl.read(n)) ?? '';
    return out;
  }

  /**
   * The plan's actions for the forwarding of a node serving `prefixes` (none: not a router, or not a
   * via node any more). `null` prefixes: the view is not known yet, nothing is said or done.
   */
  async actions(plan: Plan, ctx: ApplyContext, store: HostStateStore, prefixes: readonly string[] | null): Promise<Action[]> {
    if (prefixes === null) return [];
    const values = await this.#values();
    const recorded = await store.getValue<ForwardingRecord>(FORWARDING_KEY);
    const mayChange = plan.mode === 'converged' || ctx.declaration.modules.some((m) => m.name === ROUTING_MODULE && m.taken);
    const need = neededSysctls(prefixes);
    const base = (name: string): Pick<Action, 'key' | 'kind' | 'module' | 'by'> => ({
      key: resourceKey('file', sysctlPath(name)),
      kind: 'file',
      module: ROUTING_MODULE,
      by: 'tunnel-wireguard',
    });
    const out: Action[] = [];
    // Put back: what meshp changed and the node no longer needs (or may no longer change).
    const restore = Object.keys(recorded?.wrote ?? {}).filter((n) => !mayChange || !need.includes(n));
    for (const n of restore) {
      out.push({
        ...base(n),
        op: 'release',
        state: 'released',
        reason: `${n} put back to ${recorded!.original[n]} as found: ${mayChange ? 'the node serves no route group of that family any more' : 'the node is adopted again'}`,
        run: () => this.restore(store, false, [n]).then(() => undefined),
      });
    }
    // Read on an adopted node too: what the flip would turn on (the status's `needed`, the controller's converge preview) leaves it out.
    const raRisk = need.includes(IPV6_FORWARD) && values[IPV6_FORWARD] !== '1' ? await this.#wouldLoseRa() : [];
    const wouldTurnOn = raRisk.length ? need.filter((n) => n !== IPV6_FORWARD) : need;
    const say = (st: Omit<ForwardingStatus, 'needed'>) => {
      // A preview (the converge preview's plan of a node still adopted) says nothing of the node as it is.
      if (!ctx.preview) this.#status = { ...st, needed: wouldTurnOn };
    };
    const plain = { values, base, prefixes, recorded, say };
    const rest = mayChange
      ? this.#converged(plain, need, store, raRisk, ctx.preview)
      : this.#adopted(
          plain,
          need.filter((x) => !restore.includes(x)),
          ctx.preview,
          raRisk,
        );
    return [...out, ...rest];
  }

  #adopted(p: Planning, need: string[], preview: boolean, raRisk: string[]): Action[] {
    const { values, base, prefixes, recorded } = p;
    const off = need.filter((n) => values[n] !== '1');
    const out: Action[] = need.map((n) => ({
      ...base(n),
      op: 'hold',
      state: 'held',
      reason:
        values[n] === '1'
          ? `found ${n}=1: the router forwards`
          : n === IPV6_FORWARD && raRisk.length
            ? `found ${n}=${values[n] || '(none)'} on an adopted node: held, never changed here; ${raReason(raRisk)}`
            : `found ${n}=${values[n] || '(none)'} on an adopted node: held, never changed here; this router forwards nothing to ${prefixes.join(', ')} until it is turned on (sysctl -w ${n}=1) or the node converges`,
    }));
    p.say(
      off.length
        ? { state: 'held', values, original: recorded?.original ?? {}, reason: `held: ${said(values, off)} on an adopted node; the router forwards nothing` }
        : need.length
          ? { state: 'found-on', values, original: {}, reason: `found ${said(values, need)}` }
          : { state: 'none', values, original: {}, reason: 'not a router' },
    );
    if (!preview && off.length && this.#warned !== off.join()) {
      this.#warned = off.join();
      this.#log.warn({ sysctls: off, prefixes }, 'forwarding is off on this adopted router: held as found, nothing is forwarded until it is turned on');
    }
    return out;
  }

  #converged(p: Planning, wanted: string[], store: HostStateStore, raRisk: string[], preview: boolean): Action[] {
    const { values, base, recorded } = p;
    // IPv6 forwarding that would stop the advertisements a route came from: held, not turned on.
    const need = raRisk.length ? wanted.filter((n) => n !== IPV6_FORWARD) : wanted;
    const turnOn = need.filter((n) => values[n] !== '1');
    const raHeld: Action[] = raRisk.length ? [{ ...base(IPV6_FORWARD), op: 'hold', state: 'held', reason: raReason(raRisk) }] : [];
    if (raRisk.length && !preview && this.#warned !== `ra:${raRisk.join()}`) {
      this.#warned = `ra:${raRisk.join()}`;
      this.#log.warn(
        { sysctl: IPV6_FORWARD, interfaces: raRisk },
        'IPv6 forwarding not turned on: it would stop the router advertisements this machine takes its IPv6 routes from',
      );
    }
    const out: Action[] = need.map((n): Action =>
      values[n] === '1'
        ? {
            ...base(n),
            op: 'keep',
            state: recorded?.wrote[n] ? 'owned' : 'held',
            reason: recorded?.wrote[n] ? `on; found ${n}=${recorded.original[n]}, put back when the node stops routing` : `found ${n}=1: the router forwards`,
          }
        : {
            ...base(n),
            op: 'converge',
            state: 'owned',
            spec: { sysctl: n, value: '1' },
            reason: `found ${n}=${values[n] || '(none)'}: recorded, then turned on for the route groups this node serves (put back when it stops routing)`,
            run: () => this.#turnOn(store, n, values[n] ?? ''),
          },
    );
    const owned = need.filter((n) => recorded?.wrote[n] || turnOn.includes(n));
    const st: Omit<ForwardingStatus, 'needed'> = owned.length
      ? {
          state: 'owned',
          values,
          original: { ...(recorded?.original ?? {}), ...Object.fromEntries(turnOn.map((n) => [n, values[n] ?? ''])) },
          reason: `turned on: ${owned.join(', ')}`,
        }
      : need.length
        ? { state: 'found-on', values, original: {}, reason: `found ${said(values, need)}` }
        : { state: 'none', values, original: {}, reason: 'not a router' };
    // What was turned on stays said (its original is kept); the IPv6 forwarding held is said beside it.
    if (raRisk.length)
      p.say({ ...st, state: st.state === 'owned' ? 'owned' : 'held', reason: `${st.state === 'none' ? '' : `${st.reason}; `}${raReason(raRisk)}` });
    else p.say(st);
    return [...out, ...raHeld];
  }

  /** The original recorded first (once: a later run never overwrites it), then the sysctl turned on. */
  async #turnOn(store: HostStateStore, name: string, found: string): Promise<void> {
    const r = (await store.getValue<ForwardingRecord>(FORWARDING_KEY)) ?? { original: {}, wrote: {}, at: new Date().toISOString() };
    if (!(name in r.original)) r.original[name] = found;
    r.wrote[name] = '1';
    await store.setValue(FORWARDING_KEY, r);
    await this.#sysctl.write(name, '1');
    const now = await this.#sysctl.read(name);
    if (now !== '1') throw new Error(`${name} is ${now} after it was set to 1`);
    this.#log.info({ sysctl: name, found }, 'forwarding turned on for the route groups this node serves (its original recorded)');
  }

  /**
   * What meshp changed put back to the recorded value (`only`: those sysctls; else all), the record
   * forgotten for them. A value changed since by someone else is left as it is. Returns what was (or,
   * in a preview, would be) done, null when nothing was recorded.
   */
  async restore(store: HostStateStore, preview: boolean, only?: readonly string[]): Promise<string | null> {
    const r = await store.getValue<ForwardingRecord>(FORWARDING_KEY);
    const names = Object.keys(r?.wrote ?? {}).filter((n) => !only || only.includes(n));
    if (!r || !names.length) return null;
    const done: string[] = [];
    for (const n of names) {
      const now = await this.#sysctl.read(n);
      if (now !== r.wrote[n]) {
        done.push(`${n} left at ${now} (changed since meshp set it to ${r.wrote[n]})`);
      } else {
        if (!preview)
          await this.#sysctl.write(n, r.original[n] ?? '0').catch((e: unknown) => {
            throw new Error(`${n} not put back to ${r.original[n]}: ${oneLine(e)}`);
          });
        done.push(`${n} put back to ${r.original[n]} as found`);
      }
      if (!preview) {
        delete r.wrote[n];
        delete r.original[n];
      }
    }
    if (!preview) {
      await store.setValue(FORWARDING_KEY, Object.keys(r.wrote).length ? r : null);
      this.#status = { state: 'none', values: await this.#values(), original: {}, reason: done.join('; '), needed: [] };
    }
    return done.join('; ');
  }
}
