import type { Request, Response } from 'express';
import type { Config } from '../config.js';

export const SESSION_COOKIE = 'svc_session';

/** The session token from the Cookie header, if any (the one cookie this service sets). */
export function sessionCookieOf(req: Request): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** HTTP-only, SameSite=Lax, Secure outside development (browsers treat http://localhost as secure). */
export function setSessionCookie(res: Response, config: Pick<Config, 'NODE_ENV'>, token: string, maxAgeSeconds: number) {
  res.cookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: config.NODE_ENV !== 'development',
    path: '/',
    maxAge: maxAgeSeconds * 1000,
  });
}

export function clearSessionCookie(res: Response, config: Pick<Config, 'NODE_ENV'>) {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'lax', secure: config.NODE_ENV !== 'development', path: '/' });
}

/**
 * CSRF defence for cookie-authenticated writes (on top of SameSite=Lax): the browser's Origin
 * must be this service's own, SVC_PUBLIC_BASE_URL (already an origin, config.ts), never one
 * derived from the Host header; without an Origin header, Sec-Fetch-Site must say
 * same-origin. API keys are never subject to it.
 */
export function isSameOrigin(req: Request, config: Pick<Config, 'SVC_PUBLIC_BASE_URL'>): boolean {
  const origin = req.headers.origin;
  if (origin !== undefined) return origin === config.SVC_PUBLIC_BASE_URL;
  return req.headers['sec-fetch-site'] === 'same-origin';
}
