/**
 * The ContainerRuntime contract on a Docker engine, through dockerode. Nothing is pulled:
 * the images a spec names must be on the machine already.
 */
import Docker from 'dockerode';
import {
  LABEL_SPEC_HASH,
  MeshpError,
  type ContainerInfo,
  type ContainerMark,
  type ContainerRuntime,
  type ContainerSpec,
  type PublishedPort,
  type Restorability,
} from '@meshp/core';
import { createOptions } from './create-options.js';
import { extraNetworks, endpointOf, keepTag, recreateOptions, volumesOf } from './recreate-options.js';
import { engineError, isNotFound } from './engine-errors.js';
import { infoFromInspect, infoFromList, listShowsImageId } from './info.js';

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';

export interface DockerRuntimeOptions {
  socketPath: string;
  /** An engine silent this long on a request is unavailable. Default 5000 ms. */
  timeoutMs?: number;
  /** How long a container gets to stop before the engine kills it. Default 10 s. */
  stopGraceSeconds?: number;
}

/** Where a replaced container waits while its successor starts. */
export function asideName(name: string, id: string): string {
  return `${name}-meshp-old-${id.slice(0, 12)}`;
}

type Doc = Docker.ContainerInspectInfo;

/**
 * dockerode would also copy every create option into the query string, env values included,
 * where an engine's debug log would keep them; only the name belongs there.
 */
function createRequest({ name, ...body }: Docker.ContainerCreateOptions): Docker.ContainerCreateOptions {
  return { _query: { name }, _body: body } as unknown as Docker.ContainerCreateOptions;
}

export class DockerRuntime implements ContainerRuntime {
  readonly socketPath: string;
  readonly timeoutMs: number;
  readonly stopGraceSeconds: number;
  readonly #docker: Docker;
  /** For stop and start, which may take the stop grace before the engine answers. */
  readonly #patient: Docker;

  constructor(options: DockerRuntimeOptions) {
    this.socketPath = options.socketPath;
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.stopGraceSeconds = options.stopGraceSeconds ?? 10;
    // host and protocol are set so a DOCKER_HOST in the environment never overrides the socket.
    const base = { socketPath: this.socketPath, host: undefined, protocol: 'http' as const };
    this.#docker = new Docker({ ...base, timeout: this.timeoutMs });
    this.#patient = new Docker({ ...base, timeout: this.timeoutMs + this.stopGraceSeconds * 1000 });
  }

  async #do<T>(what: string, run: () => Promise<T>, details?: Record<string, unknown>): Promise<T> {
    try {
      return await run();
    } catch (e) {
      throw engineError(e, what, this.socketPath, details);
    }
  }

  /** Answers, or throws MESHP_RUNTIME_UNAVAILABLE. */
  async ping(): Promise<void> {
    await this.#do('ping', () => this.#docker.ping());
  }

  async list(): Promise<ContainerInfo[]> {
    const entries = await this.#do('listing containers', () => this.#docker.listContainers({ all: true }));
    const out: ContainerInfo[] = [];
    for (const entry of entries) {
      let image = entry.Image;
      if (listShowsImageId(entry)) {
        const doc = await this.#inspectDoc(entry.Id, false);
        if (!doc) continue; // removed meanwhile
        image = doc.Config.Image;
      }
      out.push(infoFromList(entry, image));
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async inspect(name: string): Promise<{ info: ContainerInfo; document: unknown } | null> {
    const doc = await this.#inspectDoc(name);
    return doc ? { info: infoFromInspect(doc), document: doc } : null;
  }

  async publishedPorts(): Promise<PublishedPort[]> {
    return (await this.list()).flatMap((c) => c.ports);
  }

  /** By exact name (the engine would also match an id prefix), or by id. */
  async #inspectDoc(ref: string, byName = true): Promise<Doc | null> {
    try {
      const doc = await this.#docker.getContainer(ref).inspect();
      if (byName && doc.Name !== `/${ref}`) return null;
      return doc;
    } catch (e) {
      if (isNotFound(e)) return null;
      throw engineError(e, `inspecting container ${ref}`, this.socketPath, { container: ref });
    }
  }

  async #requireImage(image: string, container: string): Promise<void> {
    try {
      await this.#docker.getImage(image).inspect();
    } catch (e) {
      if (isNotFound(e)) {
        throw new MeshpError('MESHP_IMAGE_MISSING', `image ${image} for container ${container} is not on this machine (nothing is pulled)`, {
          cause: e,
          details: { image, container },
        });
      }
      throw engineError(e, `inspecting image ${image}`, this.socketPath, { image, container });
    }
  }

  /** A replaced container left aside by an ensure that did not finish, if any. */
  async #findAside(name: string): Promise<Doc | null> {
    const prefix = `/${name}-meshp-old-`;
    const entries = await this.#do('listing containers', () => this.#docker.listContainers({ all: true, filters: { name: [`${name}-meshp-old-`] } }));
    const match = entries.find((e) => e.Names.some((n) => n.startsWith(prefix) && /^[0-9a-f]{12}$/.test(n.slice(prefix.length))));
    return match ? this.#inspectDoc(match.Id, false) : null;
  }

  #stop(id: string, what: string): Promise<unknown> {
    return this.#do(what, async () => {
      try {
        await this.#patient.getContainer(id).stop({ t: this.stopGraceSeconds });
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode !== 304) throw e; // 304: already stopped
      }
    });
  }

  #start(id: string, what: string): Promise<unknown> {
    return this.#do(what, async () => {
      try {
        await this.#patient.getContainer(id).start();
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode !== 304) throw e; // 304: already running
      }
    });
  }

  async ensure(spec: ContainerSpec, mark: ContainerMark): Promise<void> {
    const options = createOptions(spec, mark);
    const existing = await this.#inspectDoc(spec.name);
    if (existing && existing.Config.Labels?.[LABEL_SPEC_HASH] === mark.specHash) {
      if (!existing.State.Running) await this.#start(existing.Id, `starting container ${spec.name}`);
      return;
    }
    await this.#requireImage(spec.image, spec.name);
    const aside = existing ? null : await this.#findAside(spec.name);
    const old = existing ?? aside;
    if (!old) {
      await this.#createAndStart(spec.name, options);
      return;
    }
    // An aside container was running before the ensure that left it there stopped it.
    const wasRunning = existing ? existing.State.Running : true;
    if (existing) {
      if (wasRunning) await this.#stop(old.Id, `stopping container ${spec.name} to replace it`);
      try {
        await this.#do(`renaming container ${spec.name} aside`, () => this.#docker.getContainer(old.Id).rename({ name: asideName(spec.name, old.Id) }));
      } catch (e) {
        if (wasRunning) await this.#start(old.Id, `restarting container ${spec.name}`).catch(() => undefined);
        throw e;
      }
    }
    let created: string | undefined;
    try {
      created = (await this.#do(`creating container ${spec.name}`, () => this.#docker.createContainer(createRequest(options)))).id;
      await this.#start(created, `starting container ${spec.name}`);
    } catch (e) {
      const failures = await this.#rollback(spec.name, created, old.Id, wasRunning);
      const err = e instanceof MeshpError ? e : engineError(e, `replacing container ${spec.name}`, this.socketPath);
      const outcome = failures.length === 0 ? 'rolled back to the previous container' : `rollback failed too: ${failures.join('; ')}`;
      throw new MeshpError(err.code, `${err.message}; ${outcome}`, {
        cause: err.cause ?? err,
        details: { ...err.details, container: spec.name, rolledBack: failures.length === 0, previous: old.Id },
      });
    }
    await this.#do(
      `removing the replaced container ${asideName(spec.name, old.Id)} (its successor ${spec.name} runs)`,
      () => this.#patient.getContainer(old.Id).remove({ force: true }),
      { container: spec.name, leftover: asideName(spec.name, old.Id) },
    );
  }

  async #createAndStart(name: string, options: Docker.ContainerCreateOptions): Promise<void> {
    const { id } = await this.#do(`creating container ${name}`, () => this.#docker.createContainer(createRequest(options)));
    try {
      await this.#start(id, `starting container ${name}`);
    } catch (e) {
      await this.#patient
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined);
      throw e;
    }
  }

  /** Puts the previous container back under its name, running if it was. Returns what failed. */
  async #rollback(name: string, created: string | undefined, oldId: string, wasRunning: boolean): Promise<string[]> {
    const failures: string[] = [];
    const step = async (what: string, run: () => Promise<unknown>) => {
      try {
        await run();
      } catch (e) {
        failures.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
      }
    };
    if (created) await step('removing the new container', () => this.#patient.getContainer(created).remove({ force: true }));
    await step('renaming the previous container back', () => this.#docker.getContainer(oldId).rename({ name }));
    if (wasRunning) await step('starting the previous container', () => this.#start(oldId, `restarting container ${name}`));
    return failures;
  }

  async remove(name: string): Promise<void> {
    const doc = await this.#inspectDoc(name);
    if (!doc) return;
    if (doc.State.Running) await this.#stop(doc.Id, `stopping container ${name}`);
    await this.#do(`removing container ${name}`, async () => {
      try {
        await this.#patient.getContainer(doc.Id).remove({ force: true });
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    });
  }

  #removeAside(name: string, id: string): Promise<unknown> {
    return this.#do(`removing the mesh's container ${asideName(name, id)} (its predecessor ${name} is back)`, () =>
      this.#patient.getContainer(id).remove({ force: true }),
    );
  }

  /** Tags a found container's image with a tag the mesh owns, so no prune takes it while its record needs it. */
  async keepImage(document: unknown): Promise<void> {
    const doc = document as Doc;
    const { repo, tag } = keepTag(doc);
    await this.#do(`tagging image ${doc.Image} as ${repo}:${tag}`, () => this.#docker.getImage(doc.Image).tag({ repo, tag }));
  }

  async #imageId(ref: string): Promise<string | null> {
    try {
      return (await this.#docker.getImage(ref).inspect()).Id;
    } catch (e) {
      if (isNotFound(e)) return null;
      throw engineError(e, `inspecting image ${ref}`, this.socketPath, { image: ref });
    }
  }

  async #volumeGone(name: string): Promise<boolean> {
    try {
      await this.#docker.getVolume(name).inspect();
      return false;
    } catch (e) {
      if (isNotFound(e)) return true;
      throw engineError(e, `inspecting volume ${name}`, this.socketPath, { volume: name });
    }
  }

  async restorable(document: unknown): Promise<Restorability> {
    const doc = document as Doc;
    const present = (await this.#imageId(doc.Image)) !== null;
    const reference = doc.Config.Image;
    const byRef = await this.#imageId(reference);
    const volumes = volumesOf(doc);
    const volumesGone: string[] = [];
    for (const v of volumes) if (await this.#volumeGone(v)) volumesGone.push(v);
    return { image: present ? 'present' : 'gone', imageId: doc.Image, reference, referenceMoved: byRef !== doc.Image, volumesGone, volumes };
  }

  /** Recreates a recorded container under its name, replacing what holds the name as ensure does (rolled back on failure). */
  async restore(document: unknown): Promise<void> {
    const doc = document as Doc;
    const name = doc.Name.replace(/^\//, '');
    const r = await this.restorable(doc);
    if (r.image === 'gone') await this.#requireImage(doc.Image, name);
    const options = recreateOptions(doc, r.referenceMoved ? doc.Image : r.reference);
    const existing = await this.#inspectDoc(name);
    const wasRunning = existing?.State.Running ?? false;
    if (existing) {
      if (wasRunning) await this.#stop(existing.Id, `stopping container ${name} to put its predecessor back`);
      await this.#do(`renaming container ${name} aside`, () => this.#docker.getContainer(existing.Id).rename({ name: asideName(name, existing.Id) }));
    }
    let created: string | undefined;
    try {
      created = (await this.#do(`recreating container ${name}`, () => this.#docker.createContainer(createRequest(options)))).id;
      for (const net of extraNetworks(doc).filter((n) => !options.NetworkingConfig?.EndpointsConfig?.[n])) {
        await this.#do(`connecting container ${name} to network ${net}`, () =>
          this.#docker.getNetwork(net).connect({ Container: created, EndpointConfig: endpointOf(doc, net) }),
        );
      }
      if (doc.State.Running) await this.#start(created, `starting container ${name}`);
    } catch (e) {
      const failures = existing ? await this.#rollback(name, created, existing.Id, wasRunning) : [];
      if (!existing && created)
        await this.#patient
          .getContainer(created)
          .remove({ force: true })
          .catch(() => undefined);
      const err = e instanceof MeshpError ? e : engineError(e, `recreating container ${name}`, this.socketPath);
      const outcome = failures.length === 0 ? 'the container before it is back' : `rollback failed too: ${failures.join('; ')}`;
      throw new MeshpError(err.code, `${err.message}; ${outcome}`, { cause: err.cause ?? err, details: { ...err.details, container: name } });
    }
    // The mesh's container, and any left aside by a restore or ensure that was killed before it ended.
    if (existing) await this.#removeAside(name, existing.Id);
    for (let left = await this.#findAside(name); left && left.Id !== created; left = await this.#findAside(name)) await this.#removeAside(name, left.Id);
  }
}
