import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { canonicalJson, sha256Hex } from '../lib/canonical-json.js';
import { ApiError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { routeMeta } from './auth.js';
import { ctxOf } from './context.js';

const TTL_MS = 24 * 3600 * 1000;
/**
 * A key in progress is held by a lease the running request renews every LEASE_RENEW_MS; a
 * key whose request died with its process (kill -9, crash, lost host) is reclaimable once
 * the lease runs out. Lease times use the database's now() on purpose: every server
 * process sharing the database reads the same clock.
 */
export const LEASE_SECONDS = 15;
const LEASE_RENEW_MS = 5_000;
const LEASE = `interval '${LEASE_SECONDS} seconds'`;
const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency-Key on management POSTs (24 h): a repeat with the same request replays the
 * stored status and body; the same key with another request is 409 IDEMPOTENCY_KEY_REUSED.
 * The key row is claimed with a unique constraint, so two concurrent first tries cannot both run.
 * The claim is a lease owned by a token: renewed while the request runs, taken over by a
 * retry once it has run out, and every later write of the row checks the token.
 */
export async function idempotencyMiddleware(req: Request, res: Response, next: NextFunction) {
  try {
    const meta = routeMeta(req);
    const key = req.header('idempotency-key');
    if (!key || (req.method !== 'POST' && req.method !== 'PUT') || meta?.auth !== 'key') return next();
    if (!KEY_RE.test(key)) throw new ApiError('VALIDATION_FAILED', 'Idempotency-Key must be 1-255 printable ASCII characters.');
    const ctx = ctxOf(req);
    const auth = ctx.auth!;
    const scopeKey = `${auth.projectId}:${auth.mode}`;
    const requestHash = sha256Hex(`${req.method} ${req.originalUrl}\n${canonicalJson(req.body ?? null)}`);
    const em = ctx.services.orm.em.fork();
    // Stored responses can carry secrets shown once (webhook secrets), so they are sealed at rest.
    const aad = `idempotency:${scopeKey}:${key}`;

    const owner = randomUUID();
    const claim = async () =>
      em.execute(
        `insert into idempotency_keys (id, scope_key, idem_key, request_hash, locked_until, lock_owner) values (?, ?, ?, ?, now() + ${LEASE}, ?)
         on conflict (scope_key, idem_key) do nothing returning id`,
        [newId('idem'), scopeKey, key, requestHash, owner],
      );
    // A key whose holder stopped renewing (rows from before leases: created_at + the lease).
    const takeOver = async () =>
      em.execute(
        `update idempotency_keys set locked_until = now() + ${LEASE}, lock_owner = ?
         where scope_key = ? and idem_key = ? and request_hash = ? and status is null
           and coalesce(locked_until, created_at + ${LEASE}) < now()
         returning id`,
        [owner, scopeKey, key, requestHash],
      );
    let claimed = await claim();
    if (claimed.length === 0) {
      const rows = await em.execute<Array<{ request_hash: string; status: number | null; response: string | null; created_at: Date }>>(
        'select request_hash, status, response, created_at from idempotency_keys where scope_key = ? and idem_key = ?',
        [scopeKey, key],
      );
      const row = rows[0];
      if (row && Date.now() - new Date(row.created_at).getTime() > TTL_MS) {
        await em.execute('delete from idempotency_keys where scope_key = ? and idem_key = ? and created_at = ?', [scopeKey, key, row.created_at]);
        claimed = await claim();
      } else if (row) {
        if (row.request_hash !== requestHash) throw new ApiError('IDEMPOTENCY_KEY_REUSED');
        if (row.status === null) {
          claimed = await takeOver();
          if (claimed.length === 0) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
        } else {
          res.setHeader('Idempotent-Replayed', 'true');
          res.status(row.status).type('application/json').send(row.response ? ctx.services.box.open(row.response, aad) : '');
          return;
        }
      }
      if (claimed.length === 0) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
    }

    // Renew the lease while the request runs; a dead process stops renewing.
    const renew = setInterval(() => {
      em.execute(`update idempotency_keys set locked_until = now() + ${LEASE} where scope_key = ? and idem_key = ? and lock_owner = ? and status is null`, [
        scopeKey,
        key,
        owner,
      ]).catch((err: unknown) => ctx.log.warn({ err: String(err) }, 'failed to renew idempotency lease'));
    }, LEASE_RENEW_MS);
    renew.unref();
    const stopRenewing = () => clearInterval(renew);

    // Store the exact response text before it is sent, so a replay is byte for byte the same.
    let settled = false;
    const release = () => em.execute('delete from idempotency_keys where scope_key = ? and idem_key = ? and lock_owner = ? and status is null', [scopeKey, key, owner]);
    const originalJson = res.json.bind(res);
    res.json = (body: unknown) => {
      settled = true;
      stopRenewing();
      const status = res.statusCode;
      const text = JSON.stringify(body);
      const store =
        status >= 500
          ? release()
          : em.execute(
              'update idempotency_keys set status = ?, response = ?, locked_until = null where scope_key = ? and idem_key = ? and lock_owner = ? and status is null',
              [status, ctx.services.box.seal(text, aad), scopeKey, key, owner],
            );
      store
        .catch((err: unknown) => ctx.log.error({ err: String(err) }, 'failed to store idempotent response'))
        .finally(() => {
          if (!res.headersSent) res.type('application/json').send(text);
        });
      return res;
    };
    // A request that ends without a JSON response (client gone, crash) frees its key for a retry.
    res.on('close', () => {
      stopRenewing();
      if (!settled) release().catch((err: unknown) => ctx.log.error({ err: String(err) }, 'failed to release idempotency key'));
    });
    next();
  } catch (err) {
    next(err);
  }
}
