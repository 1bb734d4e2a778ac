import type { Scope } from '@svc/contract';
import type { Em, Orm } from '../db/orm.js';
import type { Logger } from '../lib/logger.js';
import type { Services } from '../services.js';

export type Mode = 'test' | 'live';

export type AuthContext = {
  keyId: string;
  projectId: string;
  mode: Mode;
  livemode: boolean;
  scopes: Scope[];
};

/** Everything a service needs for one request; handlers pass it through untouched. */
export type Ctx = {
  em: Em;
  log: Logger;
  requestId: string;
  services: Services;
  auth?: AuthContext;
};

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      ctx?: Ctx;
      rawBody?: Buffer;
    }
  }
}

export function ctxOf(req: { ctx?: Ctx }): Ctx {
  if (!req.ctx) throw new Error('request context missing');
  return req.ctx;
}

/** The authenticated context; only called from key-auth routes, after the auth middleware. */
export function authed(req: { ctx?: Ctx }): Ctx & { auth: AuthContext } {
  const ctx = ctxOf(req);
  if (!ctx.auth) throw new Error('auth context missing on a key route');
  return ctx as Ctx & { auth: AuthContext };
}

export type { Orm };
