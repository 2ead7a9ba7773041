/**
 * What one reconcile carries from its plan to its apply and its report: read once, before anything is written.
 */
import type { FirewallDriver, HostStateStore } from '../contract/providers.js';
import type { ApplyContext } from '../contract/plan.js';
import type { Declaration } from '../contract/model.js';
import type { Handlers } from './handlers.js';
import type { Declared, Records, Seen } from './rule.js';
import type { Verdict } from './verify.js';

/** The host-state key under which a node keeps the firewall it retired when it converged. */
export const RETIRED_KEY = 'firewall.retired';

/** An action that failed while applying (the report marks it refused). */
export interface Failure {
  key: string;
  error: string;
}

export interface InternalContext {
  decl: Declaration;
  store: HostStateStore;
  handlers: Handlers;
  records: Records;
  seen: Map<string, Seen>;
  driver: FirewallDriver | null;
  applyContext: ApplyContext;
  declared: Declared[];
  /** Ids of the openings carrying the mesh's mark that the firewall holds now. */
  present: Set<string>;
  /** Why the firewall refused this reconcile's openings, if it did. */
  firewallError?: string;
  /** Openings the driver refused or its walk did not see open (or could not read), by key. */
  verdicts: Map<string, Verdict>;
}
