import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../lib/errors.js';

/** Deeper JSON than any request of this API needs; bounds recursion in hashing and storage. */
export const MAX_BODY_DEPTH = 64;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why a parsed JSON value cannot be stored or canonicalized, or null when it can. */
function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'contains a NUL character (U+0000)';
  if (LONE_SURROGATE.test(s)) return 'is not well-formed Unicode (lone surrogate)';
  return null;
}

/**
 * Finds the first value in a parsed body that valid JSON can carry but the database and
 * the JCS hash cannot: NUL characters and lone surrogates in strings or keys (Postgres
 * text and jsonb refuse them), non-finite numbers (`1e999` parses to Infinity) and
 * nesting deeper than MAX_BODY_DEPTH, and `__proto__` keys. Returns `[path, problem]` or null.
 */
export function findUnstorableJson(value: unknown, path = 'body', depth = 0): [string, string] | null {
  if (typeof value === 'string') {
    const p = stringProblem(value);
    return p ? [path, p] : null;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? null : [path, 'is a number out of range'];
  if (value === null || typeof value !== 'object') return null;
  if (depth >= MAX_BODY_DEPTH) return [path, `nests deeper than ${MAX_BODY_DEPTH} levels`];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findUnstorableJson(value[i], `${path}.${i}`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    const label = `${path}.${JSON.stringify(k).slice(1, -1)}`;
    // Schema parsing copies keys by assignment, where `__proto__` would be dropped silently.
    const keyProblem = k === '__proto__' ? 'is reserved (__proto__)' : stringProblem(k);
    if (keyProblem) return [label, `has a key that ${keyProblem}`];
    const hit = findUnstorableJson(v, label, depth + 1);
    if (hit) return hit;
  }
  return null;
}

/** 400 VALIDATION_FAILED, naming the field, for bodies the contract accepts but storage cannot hold. */
export function bodyGuardMiddleware(req: Request, _res: Response, next: NextFunction) {
  const hit = req.body === undefined ? null : findUnstorableJson(req.body);
  if (!hit) return next();
  const where = hit[0].length > 120 ? `${hit[0].slice(0, 120)}…` : hit[0];
  next(new ApiError('VALIDATION_FAILED', `${where}: ${hit[1]}.`));
}
