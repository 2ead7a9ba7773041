import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { MeshpError } from '@meshp/core';

const run = promisify(execFile);

interface IpAddr {
  ifname: string;
  addr_info?: { local: string; prefixlen: number; family: string }[];
}

interface IpRoute {
  dst: string;
  dev?: string;
}

/** The machine's addresses and routes, by interface, from `ip -j`. */
export async function addresses(): Promise<{ interface: string; cidr: string }[]> {
  try {
    const [a, r] = await Promise.all([run('ip', ['-j', 'addr', 'show']), run('ip', ['-j', 'route', 'show'])]);
    const out: { interface: string; cidr: string }[] = [];
    for (const i of JSON.parse(a.stdout) as IpAddr[]) {
      for (const info of i.addr_info ?? []) out.push({ interface: i.ifname, cidr: `${info.local}/${info.prefixlen}` });
    }
    for (const route of JSON.parse(r.stdout) as IpRoute[]) {
      if (route.dst && route.dst !== 'default') out.push({ interface: route.dev ?? '?', cidr: route.dst.includes('/') ? route.dst : `${route.dst}/32` });
    }
    return out;
  } catch (e) {
    throw new MeshpError('MESHP_PLUGIN_FAILED', 'cannot read the machine addresses with ip -j', { cause: e });
  }
}
