/**
 * The interface's own settings, from the view's `tunnel` component (address, port, MTU, keepalive)
 * and the declaration's private range: the address on the interface, the route for the private
 * range through it.
 */
import type { Components } from '@meshp/core';
import { run } from './exec.js';
import { DEFAULT_PORT } from './peer-config.js';

export interface TunnelSettings {
  /** CIDR on the interface; '' until the controller has given one. */
  address: string;
  /** The private range routed through the interface; '' when unknown. */
  range: string;
  listenPort: number;
  mtu: number;
  keepalive: number;
}

export interface SettingsOverrides {
  listenPort?: number;
  privateRange?: string;
}

export function settingsOf(c: Components, o: SettingsOverrides): TunnelSettings {
  const t = c.tunnel;
  const range = c.declaration?.settings?.privateRange || o.privateRange || '';
  const prefix = range.includes('/') ? range.split('/')[1]! : '';
  const bare = t?.address ?? '';
  const address = bare === '' || bare.includes('/') ? bare : `${bare}/${prefix || (bare.includes(':') ? '128' : '32')}`;
  return {
    address,
    range,
    listenPort: o.listenPort ?? (t?.listenPort || DEFAULT_PORT),
    mtu: t?.mtu || 1420,
    keepalive: t?.keepaliveSeconds ?? 25,
  };
}

/** Brings the link up with its address and route; only what differs from `before` is changed. */
export async function configureLink(ifname: string, s: TunnelSettings, before: TunnelSettings | null): Promise<void> {
  if (before?.address && before.address !== s.address) await run('ip', ['address', 'del', before.address, 'dev', ifname]).catch(() => undefined);
  if (s.address) await run('ip', ['address', 'replace', s.address, 'dev', ifname]);
  if (!before || before.mtu !== s.mtu || !before.address) await run('ip', ['link', 'set', 'dev', ifname, 'mtu', String(s.mtu), 'up']);
  if (before?.range && before.range !== s.range) await run('ip', ['route', 'del', before.range, 'dev', ifname]).catch(() => undefined);
  if (s.range) await run('ip', ['route', 'replace', s.range, 'dev', ifname]);
}
