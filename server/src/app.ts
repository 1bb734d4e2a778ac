import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { createExpressEndpoints } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { newId } from './lib/ids.js';
import { requestContext } from './http/context.js';
import type { Services } from './services.js';
import { authMiddleware } from './http/auth.js';
import { errorHandler, notFoundHandler, sendCode, validationErrorHandler } from './http/errors.js';
import { bodyGuardMiddleware } from './http/body-guard.js';
import { hostRequired, requestTargetGuard } from './http/request-target-guard.js';
import { idempotencyMiddleware } from './http/idempotency.js';
import { router } from './routes.js';
import { agentHostRouting } from './http/agent-host.js';
import { authenticate } from './modules/accounts/index.js';
import { authenticateSession } from './modules/auth/index.js';
import { agentRefForHost } from './modules/agent/service.js';
import { mcpRouter } from './modules/mcp/index.js';
import { docsRouter } from './http/docs.js';
import { dashboardRouter } from './http/dashboard.js';
import { metricsHandler, UNMATCHED_ROUTE } from './lib/metrics.js';

export type AppOptions = {
  /** Validate every response against the contract (on in tests so presenters cannot drift). */
  responseValidation?: boolean;
};

// x402: clients send PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1), and @x402/fetch also sets an
// Access-Control-Expose-Headers request header, so a browser preflight must allow it. MCP
// (Streamable HTTP) clients send Mcp-Protocol-Version (and Mcp-Session-Id where a server gave one).
const CORS_HEADERS =
  'Authorization, Content-Type, Idempotency-Key, X-Svc-Api-Key, If-None-Match, X-Request-Id, PAYMENT-SIGNATURE, X-PAYMENT, X-Agent-Id, Access-Control-Expose-Headers, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID';
const CORS_EXPOSED = 'ETag, Request-Id, Retry-After, Idempotent-Replayed, PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE, Mcp-Session-Id, Mcp-Protocol-Version';
/**
 * An incoming `X-Request-Id` (from a proxy or the caller) is kept when it is 1-128 characters
 * of letters, digits and `-_.:@/+=`; anything else (too long, spaces, control characters,
 * quotes) is ignored and a `req_<ulid>` is generated, so logs and headers never carry
 * attacker-shaped text.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9\-_.:@/+=]{1,128}$/;

/**
 * The anonymous, cacheable agent discovery reads: served by the thousand to agents and
 * crawlers, their answered requests log at debug (the metrics still count each one).
 */
const QUIET_ROUTES = new Set<object>([contract.agent.manifest, contract.agent.jwks, contract.agent.catalog]);

/** The route template for metrics: the ts-rest route (`/v1/merchants/:id`), the Express route, or `<unmatched>`; never the raw path. */
function routeLabel(req: Request): string {
  const tsRest = (req as Request & { tsRestRoute?: { path?: string } }).tsRestRoute;
  if (tsRest?.path) return tsRest.path;
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (route && typeof route.path === 'string') return `${req.baseUrl}${route.path}`;
  return UNMATCHED_ROUTE;
}

/** Builds the Express app without listening, so tests and main share one wiring. */
export function buildApp(services: Services, opts: AppOptions = {}): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'simple');

  app.use((req: Request, res: Response, next: NextFunction) => {
    const incoming = req.header('x-request-id');
    const requestId = incoming !== undefined && REQUEST_ID_PATTERN.test(incoming) ? incoming : newId('req');
    res.setHeader('Request-Id', requestId);
    const ctx = requestContext(services, requestId);
    req.ctx = ctx;
    if (incoming !== undefined && incoming !== requestId) ctx.log.debug({ rejected_request_id_length: incoming.length }, 'ignored an X-Request-Id that is not 1-128 safe characters');
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      services.metrics.observeRequest(req.method, routeLabel(req), res.statusCode, ms / 1000);
      // Answered agent discovery reads log at debug (docs/decisions.md "Request logs"); everything else at info.
      const quiet = res.statusCode < 400 && QUIET_ROUTES.has((req as Request & { tsRestRoute?: object }).tsRestRoute!);
      if (quiet && !services.log.isLevelEnabled('debug')) return;
      const line = { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10 };
      if (quiet) ctx.log.debug(line, 'request');
      else ctx.log.info(line, 'request');
    });
    next();
  });

  app.use((req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSED);
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', CORS_HEADERS);
      res.setHeader('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  });

  // A Host-less HTTP/1.1 request, and ids, refs and query values that cannot exist, never reach a route or the database.
  app.use(hostRequired, requestTargetGuard);

  app.use(
    express.json({
      limit: '256kb',
      type: ['application/json', 'application/*+json'],
      verify: (req, _res, buf) => {
        (req as Request).rawBody = buf;
      },
    }),
  );

  // The one form of the API: the sign-in link's page posts its token (application/x-www-form-urlencoded).
  app.use('/v1/auth/verify', express.urlencoded({ extended: false, limit: '4kb', parameterLimit: 4 }));

  // From here on (the body is read) the request runs under its database budget: everything it
  // waits for from PostgreSQL counts, and a spent budget answers 503 (db/request-budget.ts).
  app.use((_req: Request, _res: Response, next: NextFunction) => services.dbRequests.run(next));

  app.use(agentHostRouting(services.config, agentRefForHost));
  // The merchant's MCP server (/m/<ref>/mcp, and /mcp of its hosts): outside the contract, JSON-RPC over POST.
  app.use(mcpRouter());

  createExpressEndpoints(contract, router, app, {
    logInitialization: false,
    jsonQuery: false,
    responseValidation: opts.responseValidation ?? false,
    // ts-rest types these per route; ours are plain Express handlers that read req.tsRestRoute.
    // Auth first; then refuse bodies storage cannot hold (before idempotency hashes them).
    globalMiddleware: [authMiddleware({ apiKey: authenticate, session: authenticateSession }), bodyGuardMiddleware, idempotencyMiddleware] as unknown as [],
    requestValidationErrorHandler: validationErrorHandler as unknown as 'default',
  });

  // GET /metrics (Prometheus): an operator endpoint with its own bearer token, outside the contract.
  app.get(
    '/metrics',
    metricsHandler(services.metrics, {
      token: services.config.SVC_METRICS_TOKEN,
      production: services.config.NODE_ENV === 'production',
      unauthorized: (res) => sendCode(res, 'UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <SVC_METRICS_TOKEN>.'),
    }),
  );

  // GET /openapi.json and GET /docs (Redoc served locally): public, outside the contract.
  app.use(docsRouter());
  // /dashboard (the merchant web app), and / and /login leading to it.
  app.use(dashboardRouter());
  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
