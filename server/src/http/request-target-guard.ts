import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../lib/errors.js';
import { findUnstorableJson } from './body-guard.js';

const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Refuses request targets no route can serve before any handler or query sees them: a path
 * segment that decodes to a control character (NUL, CR, ...) names an id or ref that cannot
 * exist, so 404 NOT_FOUND; a query key or value the database cannot hold (NUL, lone
 * surrogate) is 400 VALIDATION_FAILED naming it, like the body guard does for bodies.
 * Segments that are not valid percent-encoding are left to the router (400).
 */
export function requestTargetGuard(req: Request, _res: Response, next: NextFunction) {
  for (const segment of req.path.split('/')) {
    let decoded = segment;
    if (segment.includes('%')) {
      try {
        decoded = decodeURIComponent(segment);
      } catch {
        continue;
      }
    }
    if (CONTROL.test(decoded)) return next(new ApiError('NOT_FOUND', 'No such resource or route.'));
  }
  const hit = findUnstorableJson({ ...(req.query as Record<string, unknown>) }, 'query');
  if (hit) {
    const where = hit[0].length > 120 ? `${hit[0].slice(0, 120)}…` : hit[0];
    return next(new ApiError('VALIDATION_FAILED', `${where}: ${hit[1]}.`));
  }
  next();
}

/**
 * An HTTP/1.1 request without a Host header is 400 (RFC 9112 section 3.2: the target's
 * authority is required). Node's server would answer it itself with an empty body; it leaves
 * it to this (transport-errors.ts `createHttpServer`). HTTP/1.0 has no such rule.
 */
export function hostRequired(req: Request, _res: Response, next: NextFunction) {
  if (req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && req.headers.host === undefined) {
    return next(new ApiError('BAD_REQUEST', 'An HTTP/1.1 request needs a Host header.'));
  }
  next();
}
