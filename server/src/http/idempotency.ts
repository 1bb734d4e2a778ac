import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { canonicalJson } from '../lib/canonical-json.js';
import { sha256 } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import {
  completeIdempotencyKey,
  deleteExpiredIdempotencyKey,
  findIdempotencyKey,
  releaseIdempotencyKey,
  renewIdempotencyLease,
  reserveIdempotencyKey,
  takeOverIdempotencyKey,
} from '../db/idempotency-store.js';
import { routeMeta } from './auth.js';
import { ctxOf } from './context.js';

const TTL_MS = 24 * 3600 * 1000;
/**
 * A key in progress is held by a lease (LEASE_SECONDS, on the database's clock: see
 * db/idempotency-store.ts) the running request renews every LEASE_RENEW_MS; a key whose
 * request died with its process (kill -9, crash, lost host) is reclaimable once the lease runs out.
 */
const LEASE_RENEW_MS = 5_000;
const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency-Key on management POSTs (24 h): a repeat with the same request replays the
 * stored status and body; the same key with another request is 409 IDEMPOTENCY_KEY_REUSED.
 * The key row is claimed with a unique constraint, so two concurrent first tries cannot both run.
 * The claim is a lease owned by a token: renewed while the request runs, taken over by a
 * retry once it has run out, and every later write of the row checks the token.
 *
 * A route's write transaction stores the response itself (`ctx.idempotency.completeIn`, see
 * http/context.ts), so the resource and its stored response commit together; the response is
 * stored here, after the handler, only for requests that wrote nothing (errors below 500, a
 * validation) and to replace a provisional one. A 5xx is never stored: the key is released.
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
    const requestHash = sha256(`${req.method} ${req.originalUrl}\n${canonicalJson(req.body ?? null)}`);
    const em = ctx.services.orm.em.fork();
    // Stored responses can carry secrets shown once (API key and webhook secrets), so they are sealed at rest.
    const aad = `idempotency:${scopeKey}:${key}`;

    const ref = { scopeKey, key };
    const owner = randomUUID();
    const claim = () => reserveIdempotencyKey(em, ref, { id: newId('idem'), requestHash, owner });
    let claimed = await claim();
    if (!claimed) {
      const row = await findIdempotencyKey(em, ref);
      if (row && ctx.services.now().getTime() - new Date(row.created_at).getTime() > TTL_MS) {
        await deleteExpiredIdempotencyKey(em, ref, row.created_at);
        claimed = await claim();
      } else if (row) {
        if (row.request_hash !== requestHash) throw new ApiError('IDEMPOTENCY_KEY_REUSED');
        if (row.status === null) {
          claimed = await takeOverIdempotencyKey(em, ref, { requestHash, owner });
          if (!claimed) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
        } else {
          res.setHeader('Idempotent-Replayed', 'true');
          res.status(row.status).type('application/json').send(row.response ? ctx.services.box.open(row.response, aad) : '');
          return;
        }
      }
      if (!claimed) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
    }

    // Renew the lease while the request runs; a dead process stops renewing.
    const renew = setInterval(() => {
      renewIdempotencyLease(em, ref, owner).catch((err: unknown) => ctx.log.warn({ err: String(err) }, 'failed to renew idempotency lease'));
    }, LEASE_RENEW_MS);
    renew.unref();
    const stopRenewing = () => clearInterval(renew);

    // The response the request's own write transaction stored (completeIn), once it answers.
    let inTransaction: { status: number; text: string; provisional: boolean } | null = null;
    ctx.idempotency = {
      completeIn: async (tx, status, body, opts = {}) => {
        const text = JSON.stringify(body);
        const provisional = opts.provisional ?? false;
        if (!(await completeIdempotencyKey(tx, ref, owner, status, ctx.services.box.seal(text, aad), { provisional }))) {
          // A retry took the key over (this request stalled past its lease): its writes must not commit too.
          throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS', 'A retry with this Idempotency-Key took it over while this request ran; retry to get its response.');
        }
        inTransaction = { status, text, provisional };
      },
    };

    // Store the exact response text before it is sent, so a replay is byte for byte the same.
    let settled = false;
    const release = () => releaseIdempotencyKey(em, ref, owner);
    res.json = (body: unknown) => {
      settled = true;
      stopRenewing();
      const status = res.statusCode;
      const stored = inTransaction;
      if (stored && !stored.provisional && stored.status === status) {
        // Committed with the request's writes: send exactly what a replay will send.
        res.type('application/json').send(stored.text);
        return res;
      }
      const text = JSON.stringify(body);
      const store =
        status >= 500
          ? release().catch((err: unknown) => {
              // The request's database budget is spent (or the database is down): the key is freed once
              // the database answers again, outside the budget and without holding this answer back.
              void ctx.services.dbRequests
                .outside(release)
                .catch((again: unknown) => ctx.log.error({ err: String(again) }, 'failed to release idempotency key'));
              throw err;
            })
          : completeIdempotencyKey(em, ref, owner, status, ctx.services.box.seal(text, aad)).then(() => undefined);
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
