/** Reaching the controller's Admin service: the credential from --credential FILE or --state DIR. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { malformed, usage } from '@meshp/core/util';
import { ADDRESS_FILE, ADMIN_CREDENTIAL_FILE, DEFAULT_NETWORK, readAdminCredential } from '@meshp/controller/client';
import { AdminClient } from '@meshp/transport-grpc';

export interface RemoteArgs {
  /** One address, or several replicas' (`--controller` repeated): the first that answers is used. */
  controller?: string | string[];
  state?: string;
  credential?: string;
  network?: string;
}

export function networkOf(a: RemoteArgs): string {
  return a.network ?? DEFAULT_NETWORK;
}

export async function connectAdmin(a: RemoteArgs): Promise<AdminClient> {
  const file = a.credential ?? (a.state ? join(a.state, ADMIN_CREDENTIAL_FILE) : undefined);
  if (!file) throw usage('give --credential FILE or --state DIR (the controller state folder)');
  const cred = readAdminCredential(file);
  const addresses = [a.controller ?? []].flat().filter(Boolean);
  if (!addresses.length && a.state && existsSync(join(a.state, ADDRESS_FILE))) addresses.push(readFileSync(join(a.state, ADDRESS_FILE), 'utf8').trim());
  if (!addresses.length) throw usage('name the controller with --controller HOST:PORT');
  // Replicas in the order given; only one that cannot be reached is passed over (nothing was sent
  // to it). Any other refusal (a certificate that is not the pinned one) stops here.
  const unreachable: string[] = [];
  for (const address of addresses) {
    try {
      return await AdminClient.connect({ address, fingerprint: cred.fingerprint, credential: cred.secret });
    } catch (e) {
      if (!(e instanceof MeshpError) || e.code !== 'MESHP_UNAVAILABLE' || addresses.length === 1) throw e;
      unreachable.push(e.message);
    }
  }
  throw new MeshpError('MESHP_UNAVAILABLE', `no controller answered: ${unreachable.join('; ')}`);
}

/** Runs one admin call and closes the client whatever happens. */
export async function withAdmin<T>(a: RemoteArgs, fn: (c: AdminClient, network: string) => Promise<T>): Promise<T> {
  const c = await connectAdmin(a);
  try {
    return await fn(c, networkOf(a));
  } finally {
    c.close();
  }
}

/**
 * A message field the controller always sets: proto3 leaves a sub-message optional on the wire, so an
 * answer without it is a controller that does not speak this CLI's protocol, refused by name.
 */
export function present<T>(v: T | undefined, field: string): T {
  if (v === undefined) throw malformed(`the controller's answer has no ${field}`);
  return v;
}

/** A string field the proto leaves open but this CLI reads as one of a few words: checked, not cast. */
export function oneOf<T extends string>(v: string, words: readonly T[], field: string): T {
  const found = words.find((w) => w === v);
  if (found === undefined) throw malformed(`the controller's answer has ${field} ${JSON.stringify(v)}, not one of ${words.join(', ')}`);
  return found;
}
