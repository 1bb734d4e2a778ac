import type { Mode, Scope } from '@svc/contract';
import type { Config } from '../config.js';
import type { Em, Orm } from '../db/orm.js';
import type { RequestDbBudget } from '../db/request-budget.js';
import type { SecretBox } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import type { Metrics } from '../lib/metrics.js';
import type { SignerRecovery } from '../lib/signer-recovery.js';
import type { Facilitators } from '../rails/index.js';

export type { Mode };

/**
 * Per-process caches (each says what invalidates it where it is read). Empty here: each module
 * that owns a cache adds its member in its `services.ts` (declaration merging, see Services).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-interface, @typescript-eslint/no-empty-object-type
export interface Caches {}

/**
 * Process-wide dependencies, built once at start (boot.ts) and shared by every request.
 * Declared here, in the bottom layer, so every layer can name it without importing upward.
 * This declaration holds only bottom-layer members; each module adds the members whose types it
 * owns from its own `modules/<name>/services.ts`
 * (`declare module '../../http/context.js' { interface Services { ... } }`).
 */
export interface Services {
  config: Config;
  orm: Orm;
  /** Each HTTP request's total wait on PostgreSQL (SVC_DB_REQUEST_TIMEOUT_MS): app.ts runs every request under it. */
  dbRequests: RequestDbBudget;
  box: SecretBox;
  log: Logger;
  now: () => Date;
  /** x402 facilitators by mode (test: the mock; live: SVC_LIVE_FACILITATOR). */
  facilitators: Facilitators;
  /** EIP-712 signer recovery off the request thread (a worker-thread pool started at first use). */
  signers: SignerRecovery;
  caches: Caches;
  /** This instance's Prometheus registry and its counters (GET /metrics). */
  metrics: Metrics;
}

export type AuthContext = {
  /** How the caller proved itself: a Bearer API key, or a signed-in member's session cookie. */
  via: 'key' | 'session';
  /** The API key (via key), else null. */
  keyId: string | null;
  /** The signed-in user and session (via session), else null. */
  userId: string | null;
  sessionId: string | null;
  projectId: string;
  mode: Mode;
  livemode: boolean;
  scopes: Scope[];
};

/**
 * A request that holds an Idempotency-Key (http/idempotency.ts). Every write a key-honouring
 * route makes calls `completeIn` as the last statement of the transaction that makes it, with
 * the status and body the route answers: the stored response commits with the resource, so a
 * crash (kill -9) can never leave one without the other. It throws (the transaction rolls
 * back) when a retry took the key over meanwhile. `provisional`: the outcome a later step
 * replaces (an approved hold whose capture goes on chain after this transaction).
 */
export type IdempotentRequest = {
  completeIn(tx: Em, status: number, body: unknown, opts?: { provisional?: boolean }): Promise<void>;
};

/** Everything a service needs for one request; handlers pass it through untouched. */
export type Ctx = {
  em: Em;
  log: Logger;
  requestId: string;
  services: Services;
  auth?: AuthContext;
  /** Set when the request holds an Idempotency-Key; see IdempotentRequest. */
  idempotency?: IdempotentRequest;
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

/**
 * A request's context. Its EntityManager fork and its child logger are made on first use:
 * a cached agent read (modules/agent/cache.ts) needs neither, and forking an EntityManager
 * costs more than serving the cached manifest. Both stay assignable (auth narrows the logger).
 */
export function requestContext(services: Services, requestId: string): Ctx {
  let em: Em | undefined;
  let log: Logger | undefined;
  return {
    requestId,
    services,
    get em() {
      return (em ??= services.orm.em.fork());
    },
    set em(value: Em) {
      em = value;
    },
    get log() {
      return (log ??= services.log.child({ request_id: requestId }));
    },
    set log(value: Logger) {
      log = value;
    },
  };
}

/**
 * The last step of a key-honouring route's write transaction: `body` (what the route answers
 * with `status`) becomes the request's stored Idempotency-Key response in `tx` when it holds a
 * key, and is returned.
 */
export async function respondIn<T>(ctx: Ctx, tx: Em, status: number, body: T): Promise<T> {
  await ctx.idempotency?.completeIn(tx, status, body);
  return body;
}

export function ctxOf(req: { ctx?: Ctx }): Ctx {
  if (!req.ctx) throw new Error('request context missing');
  return req.ctx;
}

/** A request's context once the auth middleware has authenticated it (what `authed` answers). */
export type AuthedCtx = Ctx & { auth: AuthContext };

/** The authenticated context; only called from key-auth routes, after the auth middleware. */
export function authed(req: { ctx?: Ctx }): AuthedCtx {
  const ctx = ctxOf(req);
  if (!ctx.auth) throw new Error('auth context missing on a key route');
  return ctx as AuthedCtx;
}

export type { Orm };

/**
 * The origin every absolute URL the service hands out starts with (sign-in links, the device
 * page, review_url): SVC_PUBLIC_BASE_URL, or outside production `http://localhost:<PORT>`
 * (config.ts). Never the request's Host header, which the caller chooses.
 */
export function publicBaseUrl(req: { ctx?: Ctx }): string {
  return ctxOf(req).services.config.SVC_PUBLIC_BASE_URL;
}

/**
 * The origin of the agent routes as the agent reached them: the configured origin of the
 * discovery host or of the merchant's own domain when agent-host routing chose one, else the
 * public base URL (the `/m/<ref>` form). Used for x402 `resource.url`.
 */
export function agentOriginOf(req: { ctx?: Ctx; agentOrigin?: string }): string {
  return req.agentOrigin ?? publicBaseUrl(req);
}

/** The path prefix the agent used for this merchant (`/m/<ref>`, or '' on a discovery or merchant host). */
export function agentPrefixOf(req: { agentPrefix?: string }, ref: string): string {
  return req.agentPrefix ?? `/m/${ref}`;
}
