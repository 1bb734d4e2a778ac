import type { NextFunction, Request, Response } from 'express';
import type { RouteMeta } from '@svc/contract';
import { authenticate } from '../modules/accounts/service.js';
import { ApiError } from '../lib/errors.js';
import { ctxOf } from './context.js';

type RoutedRequest = Request & { tsRestRoute?: { metadata?: unknown } };

export function routeMeta(req: Request): RouteMeta | undefined {
  return (req as RoutedRequest).tsRestRoute?.metadata as RouteMeta | undefined;
}

/** Bearer-key auth and scope enforcement, driven by the contract's route metadata. */
export async function authMiddleware(req: Request, _res: Response, next: NextFunction) {
  try {
    const meta = routeMeta(req);
    if (!meta || meta.auth === 'public') return next();
    const header = req.headers.authorization;
    if (!header) throw new ApiError('UNAUTHENTICATED');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new ApiError('UNAUTHENTICATED', 'The Authorization header must be "Bearer <API_KEY>".');
    const ctx = ctxOf(req);
    ctx.auth = await authenticate(ctx.em, m[1]!);
    ctx.log = ctx.log.child({ key_id: ctx.auth.keyId, mode: ctx.auth.mode });
    const missing = meta.scopes.filter((s) => !ctx.auth!.scopes.includes(s));
    if (missing.length > 0) {
      throw new ApiError('INSUFFICIENT_SCOPE', `The API key lacks the scope ${missing.join(', ')}.`);
    }
    next();
  } catch (err) {
    next(err);
  }
}
