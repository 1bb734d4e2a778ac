import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { createExpressEndpoints } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { newId } from './lib/ids.js';
import type { Services } from './services.js';
import { authMiddleware } from './http/auth.js';
import { errorHandler, notFoundHandler, validationErrorHandler } from './http/errors.js';
import { bodyGuardMiddleware } from './http/body-guard.js';
import { requestTargetGuard } from './http/request-target-guard.js';
import { idempotencyMiddleware } from './http/idempotency.js';
import { router } from './http/router.js';
import { agentHostRouting } from './http/agent-host.js';
import { docsRouter } from './http/docs.js';

export type AppOptions = {
  /** Validate every response against the contract (on in tests so presenters cannot drift). */
  responseValidation?: boolean;
};

const CORS_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Svc-Api-Key, If-None-Match';

/** Builds the Express app without listening, so tests and main share one wiring. */
export function buildApp(services: Services, opts: AppOptions = {}): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'simple');

  app.use((req: Request, res: Response, next: NextFunction) => {
    const requestId = newId('req');
    res.setHeader('Request-Id', requestId);
    const log = services.log.child({ request_id: requestId });
    req.ctx = { em: services.orm.em.fork(), log, requestId, services };
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      log.info({ method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10 }, 'request');
    });
    next();
  });

  app.use((req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Expose-Headers', 'ETag, Request-Id, Retry-After, Idempotent-Replayed');
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', CORS_HEADERS);
      res.setHeader('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  });

  // Ids, refs and query values that cannot exist never reach a route or the database.
  app.use(requestTargetGuard);

  app.use(
    express.json({
      limit: '256kb',
      type: ['application/json', 'application/*+json'],
      verify: (req, _res, buf) => {
        (req as Request).rawBody = buf;
      },
    }),
  );

  app.use(agentHostRouting(services.config.SVC_DISCOVERY_DOMAIN));

  createExpressEndpoints(contract, router, app, {
    logInitialization: false,
    jsonQuery: false,
    responseValidation: opts.responseValidation ?? false,
    // ts-rest types these per route; ours are plain Express handlers that read req.tsRestRoute.
    // Auth first; then refuse bodies storage cannot hold (before idempotency hashes them).
    globalMiddleware: [authMiddleware, bodyGuardMiddleware, idempotencyMiddleware] as unknown as [],
    requestValidationErrorHandler: validationErrorHandler as unknown as 'default',
  });

  // GET /openapi.json and GET /docs (Redoc served locally): public, outside the contract.
  app.use(docsRouter());
  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
