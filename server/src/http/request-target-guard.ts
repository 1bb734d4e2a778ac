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
