import { MeshpError, PLUGIN_API_VERSION, STAGES, type Plugin, type PluginHost } from '@meshp/core';
import { DEFAULT_DOCKER_SOCKET, DockerRuntime } from './runtime.js';

export interface DockerPluginOptions {
  /** Overrides the host's `dockerSocket` option. */
  socketPath?: string;
  timeoutMs?: number;
  stopGraceSeconds?: number;
}

/**
 * Provides the container runtime on a Docker engine, and adds the published ports it sees to
 * the node's report (`facts.publishedPorts`), or why it could not see them (`facts.containerRuntime`).
 */
export class DockerPlugin implements Plugin {
  readonly name = 'runtime-docker';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly options: Readonly<DockerPluginOptions>;

  constructor(options: DockerPluginOptions = {}) {
    if (options.socketPath !== undefined && (typeof options.socketPath !== 'string' || !options.socketPath.startsWith('/'))) {
      throw new MeshpError('MESHP_PLUGIN_INVALID', 'runtime-docker: socketPath must be an absolute path');
    }
    for (const key of ['timeoutMs', 'stopGraceSeconds'] as const) {
      const v = options[key];
      if (v !== undefined && !(Number.isFinite(v) && v >= 0)) {
        throw new MeshpError('MESHP_PLUGIN_INVALID', `runtime-docker: ${key} must be a number ≥ 0`);
      }
    }
    this.options = Object.freeze({ ...options });
  }

  apply(host: PluginHost): void {
    let runtime: DockerRuntime | undefined;
    host.hooks.runtime.tapPromise(this.name, async (options) => {
      runtime = new DockerRuntime({
        socketPath: this.options.socketPath ?? options.dockerSocket ?? DEFAULT_DOCKER_SOCKET,
        timeoutMs: this.options.timeoutMs,
        stopGraceSeconds: this.options.stopGraceSeconds,
      });
      return runtime;
    });
    host.hooks.report.tapPromise({ name: this.name, stage: STAGES.report.LAST }, async (report) => {
      // Only when the host asked for its runtime: a report never starts talking to an engine on its own.
      if (!runtime) return report;
      try {
        const publishedPorts = await runtime.publishedPorts();
        return { ...report, facts: { ...report.facts, publishedPorts, containerRuntime: { socket: runtime.socketPath, available: true } } };
      } catch (e) {
        const reason = e instanceof MeshpError ? e.oneLine() : String(e);
        return { ...report, facts: { ...report.facts, containerRuntime: { socket: runtime.socketPath, available: false, reason } } };
      }
    });
  }
}
