import type { NextFunction, Request, Response } from 'express';
import { canonicalJson, sha256Hex } from '../lib/canonical-json.js';
import { ApiError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { routeMeta } from './auth.js';
import { ctxOf } from './context.js';

const TTL_MS = 24 * 3600 * 1000;
const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency-Key on management POSTs (24 h): a repeat with the same request replays the
 * stored status and body; the same key with another request is 409 IDEMPOTENCY_KEY_REUSED.
 * The key row is claimed with a unique constraint, so two concurrent first tries cannot both run.
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

    const claim = async () =>
      em.execute(
        'insert into idempotency_keys (id, scope_key, idem_key, request_hash) values (?, ?, ?, ?) on conflict (scope_key, idem_key) do nothing returning id',
        [newId('idem'), scopeKey, key, requestHash],
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
        if (row.status === null) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
        res.setHeader('Idempotent-Replayed', 'true');
        res.status(row.status).type('application/json').send(row.response ? ctx.services.box.open(row.response, aad) : '');
        return;
      }
      if (claimed.length === 0) throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS');
    }

    // Store the exact response text before it is sent, so a replay is byte for byte the same.
    let settled = false;
    const release = () => em.execute('delete from idempotency_keys where scope_key = ? and idem_key = ?', [scopeKey, key]);
    const originalJson = res.json.bind(res);
    res.json = (body: unknown) => {
      settled = true;
      const status = res.statusCode;
      const text = JSON.stringify(body);
      const store =
        status >= 500
          ? release()
          : em.execute('update idempotency_keys set status = ?, response = ? where scope_key = ? and idem_key = ?', [
              status,
              ctx.services.box.seal(text, aad),
              scopeKey,
              key,
            ]);
      store
        .catch((err: unknown) => ctx.log.error({ err: String(err) }, 'failed to store idempotent response'))
        .finally(() => {
          if (!res.headersSent) res.type('application/json').send(text);
        });
      return res;
    };
    // A request that ends without a JSON response (client gone, crash) frees its key for a retry.
    res.on('close', () => {
      if (!settled) release().catch((err: unknown) => ctx.log.error({ err: String(err) }, 'failed to release idempotency key'));
    });
    next();
  } catch (err) {
    next(err);
  }
}
