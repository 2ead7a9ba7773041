/** A declared container spec, as the engine's create request, labelled as the mesh's. */
import type Docker from 'dockerode';
import { LABEL_MODULE, LABEL_NODE, LABEL_SPEC_HASH, MeshpError, type ContainerMark, type ContainerSpec } from '@meshp/core';

export function markLabels(mark: ContainerMark): Record<string, string> {
  return { [LABEL_MODULE]: mark.module, [LABEL_SPEC_HASH]: mark.specHash, [LABEL_NODE]: mark.node };
}

function invalid(spec: ContainerSpec, why: string): MeshpError {
  return new MeshpError('MESHP_DECLARATION_INVALID', `container ${spec.name}: ${why}`, { details: { container: spec.name } });
}

function isPort(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) > 0 && (n as number) < 65536;
}

export function createOptions(spec: ContainerSpec, mark: ContainerMark): Docker.ContainerCreateOptions {
  if (!spec.name || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(spec.name)) throw invalid(spec, 'the name is not a valid container name');
  if (!spec.image) throw invalid(spec, 'no image');

  const exposed: Record<string, object> = {};
  const bindings: Docker.PortMap = {};
  for (const p of spec.ports ?? []) {
    if (!isPort(p.container) || !isPort(p.host)) throw invalid(spec, `port ${p.host}:${p.container} is out of range`);
    const key = `${p.container}/${p.protocol ?? 'tcp'}`;
    exposed[key] = {};
    (bindings[key] ??= []).push({ HostPort: String(p.host) });
  }

  const binds = (spec.mounts ?? []).map((m) => {
    if (!m.source.startsWith('/') || !m.target.startsWith('/')) throw invalid(spec, `mount ${m.source}:${m.target} needs absolute paths`);
    if (m.source.includes(':') || m.target.includes(':')) throw invalid(spec, `mount ${m.source}:${m.target} has a colon in a path`);
    return `${m.source}:${m.target}${m.readOnly ? ':ro' : ''}`;
  });

  const env = Object.entries(spec.env ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`);

  const hostConfig: Docker.HostConfig = { PortBindings: bindings, Binds: binds };
  if (spec.restart) hostConfig.RestartPolicy = { Name: spec.restart };

  const options: Docker.ContainerCreateOptions = {
    name: spec.name,
    Image: spec.image,
    Env: env,
    Labels: markLabels(mark),
    ExposedPorts: exposed,
    HostConfig: hostConfig,
  };
  if (spec.command && spec.command.length > 0) options.Cmd = [...spec.command];
  return options;
}
