import type { Plugin, PluginHost } from '@meshp/core';

/** Types for the template, so a TypeScript test can import it as it is. */
export default class MyKindPlugin implements Plugin {
  readonly name: string;
  readonly apiVersion: 1;
  constructor(options?: { netns?: string; privateRange?: string; [option: string]: unknown });
  apply(host: PluginHost): void;
}
