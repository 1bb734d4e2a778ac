import type { Em } from './orm.js';

/**
 * Data access for `idempotency_keys` (SQL only: the claim is an atomic insert-or-nothing and
 * every later write is fenced by the lease owner in the same statement). Lease times use the
 * database's now() on purpose: every server process sharing the database reads one clock.
 */
export const LEASE_SECONDS = 15;
const LEASE = `interval '${LEASE_SECONDS} seconds'`;

export type IdempotencyKeyRef = { scopeKey: string; key: string };
export type StoredIdempotentResponse = { request_hash: string; status: number | null; response: string | null; created_at: Date };

/** Claims the key with a fresh lease for `owner`; false when another row holds it. */
export async function reserveIdempotencyKey(em: Em, ref: IdempotencyKeyRef, input: { id: string; requestHash: string; owner: string }): Promise<boolean> {
  const rows = await em.execute(
    `insert into idempotency_keys (id, scope_key, idem_key, request_hash, locked_until, lock_owner) values (?, ?, ?, ?, now() + ${LEASE}, ?)
     on conflict (scope_key, idem_key) do nothing returning id`,
    [input.id, ref.scopeKey, ref.key, input.requestHash, input.owner],
  );
  return rows.length > 0;
}

/** Takes over a key whose holder stopped renewing (rows from before leases: created_at + the lease). */
export async function takeOverIdempotencyKey(em: Em, ref: IdempotencyKeyRef, input: { requestHash: string; owner: string }): Promise<boolean> {
  const rows = await em.execute(
    `update idempotency_keys set locked_until = now() + ${LEASE}, lock_owner = ?
     where scope_key = ? and idem_key = ? and request_hash = ? and status is null
       and coalesce(locked_until, created_at + ${LEASE}) < now()
     returning id`,
    [input.owner, ref.scopeKey, ref.key, input.requestHash],
  );
  return rows.length > 0;
}

export async function findIdempotencyKey(em: Em, ref: IdempotencyKeyRef): Promise<StoredIdempotentResponse | undefined> {
  const rows = await em.execute<StoredIdempotentResponse[]>('select request_hash, status, response, created_at from idempotency_keys where scope_key = ? and idem_key = ?', [
    ref.scopeKey,
    ref.key,
  ]);
  return rows[0];
}

/** Deletes an expired key row (only the exact row that was read, by its created_at). */
export async function deleteExpiredIdempotencyKey(em: Em, ref: IdempotencyKeyRef, createdAt: Date): Promise<void> {
  await em.execute('delete from idempotency_keys where scope_key = ? and idem_key = ? and created_at = ?', [ref.scopeKey, ref.key, createdAt]);
}

export async function renewIdempotencyLease(em: Em, ref: IdempotencyKeyRef, owner: string): Promise<void> {
  await em.execute(`update idempotency_keys set locked_until = now() + ${LEASE} where scope_key = ? and idem_key = ? and lock_owner = ? and status is null`, [
    ref.scopeKey,
    ref.key,
    owner,
  ]);
}

/** Frees a key still in progress and held by `owner`, for a retry. */
export async function releaseIdempotencyKey(em: Em, ref: IdempotencyKeyRef, owner: string): Promise<void> {
  await em.execute('delete from idempotency_keys where scope_key = ? and idem_key = ? and lock_owner = ? and status is null', [ref.scopeKey, ref.key, owner]);
}

/**
 * Stores the status and (sealed) response text, if `owner` still holds the key: a key in
 * progress, or one holding a provisional response of this owner. True when stored. Called
 * inside the transaction of the request's writes (`IdempotentRequest.completeIn`), so the
 * response commits with what it reports, or after a request that wrote nothing.
 *
 * A provisional response (a write whose final outcome comes from a later step, such as an
 * approved hold settling on chain) is replayed like any stored one but keeps its lease
 * columns, so the same owner may replace it with the final response; `locked_until` is null
 * exactly on final rows.
 */
export async function completeIdempotencyKey(
  em: Em,
  ref: IdempotencyKeyRef,
  owner: string,
  status: number,
  sealedResponse: string,
  opts: { provisional?: boolean } = {},
): Promise<boolean> {
  const rows = await em.execute(
    `update idempotency_keys set status = ?, response = ?, locked_until = ${opts.provisional ? 'coalesce(locked_until, now())' : 'null'}
     where scope_key = ? and idem_key = ? and lock_owner = ? and (status is null or locked_until is not null)
     returning id`,
    [status, sealedResponse, ref.scopeKey, ref.key, owner],
  );
  return rows.length > 0;
}
