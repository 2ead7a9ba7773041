/** The options every command takes (cli.ts declares them to yargs); each command's args extend them. */
export interface GlobalArgs {
  json: boolean;
  state?: string;
  /** Several when repeated: replicas, the first that answers is used. */
  controller?: string | string[];
}
