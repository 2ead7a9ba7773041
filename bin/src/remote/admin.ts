/** Reaching the controller's Admin service: the credential from --credential FILE or --state DIR. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { ADDRESS_FILE, ADMIN_CREDENTIAL_FILE, DEFAULT_NETWORK, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';

export interface RemoteArgs {
  controller?: string;
  state?: string;
  credential?: string;
  network?: string;
}

export function networkOf(a: RemoteArgs): string {
  return a.network ?? DEFAULT_NETWORK;
}

export async function connectAdmin(a: RemoteArgs): Promise<AdminClient> {
  const file = a.credential ?? (a.state ? join(a.state, ADMIN_CREDENTIAL_FILE) : undefined);
  if (!file) throw new MeshpError('MESHP_USAGE', 'give --credential FILE or --state DIR (the controller state folder)');
  const cred = readAdminCredential(file);
  let address = a.controller;
  if (!address && a.state && existsSync(join(a.state, ADDRESS_FILE))) address = readFileSync(join(a.state, ADDRESS_FILE), 'utf8').trim();
  if (!address) throw new MeshpError('MESHP_USAGE', 'name the controller with --controller HOST:PORT');
  return AdminClient.connect({ address, fingerprint: cred.fingerprint, credential: cred.secret });
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
  if (v === undefined) throw new MeshpError('MESHP_MESSAGE_MALFORMED', `the controller's answer has no ${field}`);
  return v;
}

/** A string field the proto leaves open but this CLI reads as one of a few words: checked, not cast. */
export function oneOf<T extends string>(v: string, words: readonly T[], field: string): T {
  const found = words.find((w) => w === v);
  if (found === undefined) throw new MeshpError('MESHP_MESSAGE_MALFORMED', `the controller's answer has ${field} ${JSON.stringify(v)}, not one of ${words.join(', ')}`);
  return found;
}
