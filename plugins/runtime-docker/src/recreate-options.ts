/**
 * A recorded container (its inspect document, kept as the original when it was found) as the engine's
 * create request again (issue 29, untake): its config and host config as the engine reported them, its
 * first network's endpoint (the others are connected before it starts), and every volume it had
 * reattached: a named one through its binds or mounts as recorded, an anonymous one by its name, so
 * nothing comes back empty.
 */
import type Docker from 'dockerode';

type Doc = Docker.ContainerInspectInfo;

/** The image tag the mesh owns that keeps a found container's image from garbage collection. */
export function keepTag(doc: Doc): { repo: string; tag: string } {
  const name = doc.Name.replace(/^\//, '')
    .toLowerCase()
    .replace(/[^a-z0-9._-]/g, '-');
  return { repo: `meshp-original/${name}`, tag: doc.Image.replace(/^sha256:/, '').slice(0, 12) };
}

/** Named volumes the container used (anonymous ones included: they have names too). */
export function volumesOf(doc: Doc): string[] {
  return (doc.Mounts ?? []).filter((m) => m.Type === 'volume' && m.Name).map((m) => m.Name!);
}

function targetOf(bind: string): string {
  const parts = bind.split(':');
  return parts[1] ?? parts[0]!;
}

/** Volumes no bind or mount of the host config names (anonymous ones, made from the image's VOLUME): mounted by name. */
function anonymousMounts(doc: Doc): Docker.MountConfig {
  const host = doc.HostConfig as Docker.HostConfig & { Mounts?: Docker.MountConfig };
  const named = new Set([...(host.Binds ?? []).map(targetOf), ...(host.Mounts ?? []).map((m) => m.Target)]);
  return (doc.Mounts ?? [])
    .filter((m) => m.Type === 'volume' && m.Name && !named.has(m.Destination))
    .map((m) => ({ Type: 'volume' as const, Source: m.Name!, Target: m.Destination, ReadOnly: !m.RW }));
}

interface Endpoint {
  Aliases?: string[] | null;
  IPAMConfig?: unknown;
  Links?: string[] | null;
  DriverOpts?: unknown;
}

/** An endpoint as recorded, without what the engine gave it (ids, addresses) or the aliases it adds itself (the id's, the hostname's). */
export function endpointOf(doc: Doc, network: string): Record<string, unknown> {
  const e = (doc.NetworkSettings.Networks[network] ?? {}) as Endpoint;
  const short = doc.Id.slice(0, 12);
  const out: Record<string, unknown> = {};
  const aliases = (e.Aliases ?? []).filter((a) => a !== short && a !== doc.Config.Hostname);
  if (aliases.length > 0) out.Aliases = aliases;
  if (e.IPAMConfig) out.IPAMConfig = e.IPAMConfig;
  if (e.Links && e.Links.length > 0) out.Links = e.Links;
  if (e.DriverOpts) out.DriverOpts = e.DriverOpts;
  return out;
}

/** User-defined networks besides the first (connected after create); the built-in modes come with NetworkMode. */
export function extraNetworks(doc: Doc): string[] {
  const mode = doc.HostConfig.NetworkMode ?? 'default';
  return Object.keys(doc.NetworkSettings.Networks ?? {}).filter((n) => n !== mode && !(mode === 'default' && n === 'bridge'));
}

export function recreateOptions(doc: Doc, image: string): Docker.ContainerCreateOptions {
  const c = doc.Config as Doc['Config'] & Record<string, unknown>;
  const mounts = anonymousMounts(doc);
  const host = { ...(doc.HostConfig as Docker.HostConfig & { Mounts?: Docker.MountConfig }) };
  if (mounts.length > 0) host.Mounts = [...(host.Mounts ?? []), ...mounts];
  const mode = host.NetworkMode ?? 'default';
  const builtin = ['default', 'bridge', 'host', 'none'].includes(mode) || mode.startsWith('container:');
  const options: Docker.ContainerCreateOptions = {
    name: doc.Name.replace(/^\//, ''),
    Hostname: c.Hostname,
    Domainname: c.Domainname,
    User: c.User,
    AttachStdin: c.AttachStdin,
    AttachStdout: c.AttachStdout,
    AttachStderr: c.AttachStderr,
    Tty: c.Tty,
    OpenStdin: c.OpenStdin,
    StdinOnce: c.StdinOnce,
    Env: c.Env ?? [],
    Cmd: c.Cmd ?? undefined,
    Entrypoint: (c.Entrypoint as string[] | null) ?? undefined,
    Image: image,
    WorkingDir: c.WorkingDir,
    Labels: c.Labels ?? {},
    ExposedPorts: c.ExposedPorts ?? {},
    Volumes: c.Volumes ?? undefined,
    Healthcheck: c.Healthcheck as Docker.HealthConfig | undefined,
    StopSignal: c.StopSignal as string | undefined,
    StopTimeout: c.StopTimeout as number | undefined,
    HostConfig: host,
  };
  if (!builtin) options.NetworkingConfig = { EndpointsConfig: { [mode]: endpointOf(doc, mode) } };
  return options;
}
