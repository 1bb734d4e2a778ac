import type { NextFunction, Request, Response } from 'express';
import type { RouteMeta } from '@svc/contract';
import { ApiError } from '../lib/errors.js';
import { ctxOf, type AuthContext } from './context.js';
import type { Em } from '../db/orm.js';
import { isSameOrigin, sessionCookieOf } from './session-cookie.js';

/**
 * How a credential becomes an AuthContext. The functions are the accounts module's
 * (`authenticate`, an API key) and the auth module's (`authenticateSession`, a session cookie);
 * app.ts passes them in, so this layer imports no module. Each throws the ApiError of a bad credential.
 */
export type Authenticators = {
  apiKey: (em: Em, secret: string, now: Date) => Promise<AuthContext>;
  session: (em: Em, token: string, now: Date, select: { mode?: string; projectId?: string }) => Promise<AuthContext>;
};

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Set by the auth middleware on every contract route, for `lenientCaller`. */
      authenticators?: Authenticators;
    }
  }
}

/** Loopback peers only: the operator channel is for the server's own machine. */
export function isLoopback(address: string | undefined): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}

type RoutedRequest = Request & { tsRestRoute?: { metadata?: unknown } };

export function routeMeta(req: Request): RouteMeta | undefined {
  return (req as RoutedRequest).tsRestRoute?.metadata as RouteMeta | undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Auth and scope enforcement, driven by the contract's route metadata. `key` routes take a
 * Bearer API key, or, without an Authorization header, a signed-in member's session cookie
 * (every scope; the Svc-Mode and Svc-Project headers select mode and project); `session`
 * routes take the cookie only. Cookie-authenticated writes must come from this origin.
 */
export function authMiddleware(authenticators: Authenticators) {
  return (req: Request, res: Response, next: NextFunction) => authenticateRequest(authenticators, req, res, next);
}

async function authenticateRequest(authenticators: Authenticators, req: Request, _res: Response, next: NextFunction) {
  try {
    req.authenticators = authenticators;
    const meta = routeMeta(req);
    if (!meta || meta.auth === 'public') return next();
    const ctx = ctxOf(req);
    const header = req.headers.authorization;
    if (meta.auth === 'operator') {
      const token = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];
      if (!token || !isLoopback(req.socket.remoteAddress) || !ctx.services.operator.accepts(token)) {
        throw new ApiError('UNAUTHENTICATED', 'The operator channel needs the token of <SVC_DATA_DIR>/operator.json, from the server\'s own machine.');
      }
      return next();
    }
    if (header !== undefined && meta.auth === 'key') {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!m) throw new ApiError('UNAUTHENTICATED', 'The Authorization header must be "Bearer <API_KEY>".');
      ctx.auth = await authenticators.apiKey(ctx.em, m[1]!, ctx.services.now());
      ctx.log = ctx.log.child({ key_id: ctx.auth.keyId, mode: ctx.auth.mode });
    } else {
      const token = sessionCookieOf(req);
      if (token === undefined) {
        if (meta.auth === 'session') throw new ApiError('INVALID_SESSION', 'This route needs the signed-in session cookie (sign in with POST /v1/auth/email/start).');
        throw new ApiError('UNAUTHENTICATED');
      }
      ctx.auth = await authenticators.session(ctx.em, token, ctx.services.now(), { mode: req.get('svc-mode'), projectId: req.get('svc-project') });
      ctx.log = ctx.log.child({ user_id: ctx.auth.userId, mode: ctx.auth.mode });
      if (!SAFE_METHODS.has(req.method) && !isSameOrigin(req, ctx.services.config)) throw new ApiError('CSRF_REJECTED');
    }
    const missing = meta.scopes.filter((s) => !ctx.auth!.scopes.includes(s));
    if (missing.length > 0) {
      throw new ApiError('INSUFFICIENT_SCOPE', `The API key lacks the scope ${missing.join(', ')}.`);
    }
    next();
  } catch (err) {
    next(err);
  }
}

/**
 * The caller of a public route that answers a known caller in its own terms (the reputation
 * reads answer in the key's mode and project): the first credential present decides, a Bearer
 * API key, else `X-Svc-Api-Key` (the legacy header), else the signed-in session cookie (the
 * dashboard, with Svc-Mode and Svc-Project). Lenient: a missing, malformed, unknown or revoked
 * credential is no caller (null), never an error. Reads through `em`, the caller's own.
 */
export function lenientCaller(req: Request): (em: Em) => Promise<AuthContext | null> {
  const { services } = ctxOf(req);
  const { authenticators } = req;
  if (!authenticators) throw new Error('auth middleware missing on a contract route');
  return async (em) => {
    try {
      const bearer = req.headers.authorization;
      if (bearer !== undefined) {
        const m = /^Bearer\s+(\S+)\s*$/i.exec(bearer);
        return m ? await authenticators.apiKey(em, m[1]!, services.now()) : null;
      }
      const legacy = req.get('x-svc-api-key');
      if (legacy !== undefined) return await authenticators.apiKey(em, legacy.trim(), services.now());
      const token = sessionCookieOf(req);
      if (token !== undefined) return await authenticators.session(em, token, services.now(), { mode: req.get('svc-mode'), projectId: req.get('svc-project') });
      return null;
    } catch {
      return null;
    }
  };
}
