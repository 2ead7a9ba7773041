/**
 * Named admin credentials (issue 28): each its own secret (kept by its hash only), its name the
 * actor of its calls in the audit log, its role what it may call. The credential a controller makes
 * on its first start (`admin.credential`) is the actor `admin`, role `admin`, and is none of these.
 * Kept by the controller's store: the state folder's SQLite file, or PostgreSQL for replicas (one
 * table every replica reads at each call, so a revocation holds on every replica at once).
 */

/** `admin`: every call. `read-only`: every read and preview, no change (refused MESHP_FORBIDDEN). */
export type AdminRole = 'admin' | 'read-only';

/** Who an admin call is from: the audit log's actor and the role its calls are checked against. */
export interface AdminActor {
  name: string;
  role: AdminRole;
}

/** A named credential as the store keeps it and `admin list` shows it (never its secret). */
export interface AdminCredentialRecord {
  name: string;
  role: AdminRole;
  createdAt: string;
  /** When it was revoked (`admin revoke`): refused from then on. Null while in force. */
  revokedAt: string | null;
}

/** The named admin credentials: the SQLite store's, or store-postgres's (one table for every replica). */
export interface AdminCredentialBook {
  /** A new credential; false when the name is taken (in force or revoked: a name is one actor for good). */
  addAdmin(secretHash: string, r: AdminCredentialRecord): boolean;
  /** The credential of this secret's hash, revoked or not; null when none. */
  adminBySecret(secretHash: string): AdminCredentialRecord | null;
  /** Every named credential, by name. */
  listAdmins(): AdminCredentialRecord[];
  /** Revoked now (the record as it is after; null: no such name). A revoked one stays revoked, its first time kept. */
  revokeAdmin(name: string, at: string): AdminCredentialRecord | null;
  close(): void;

  // A store across the network: the same, without the event loop waiting (absent: the calls above).
  addAdminAsync?(secretHash: string, r: AdminCredentialRecord): Promise<boolean>;
  adminBySecretAsync?(secretHash: string): Promise<AdminCredentialRecord | null>;
  listAdminsAsync?(): Promise<AdminCredentialRecord[]>;
  revokeAdminAsync?(name: string, at: string): Promise<AdminCredentialRecord | null>;
}
