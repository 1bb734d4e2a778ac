import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type Request, type Response } from 'express';
import { sendCode } from './errors.js';

/** dashboard/dist at the repository root (built by `npm run build`, or on `npm start` when stale). */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../../dashboard/dist', import.meta.url));

/**
 * The dashboard's pages load only from this origin; Mantine sets inline styles, so styles allow
 * 'unsafe-inline' (no inline script is allowed). The dashboard cannot be framed.
 */
const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

function securityHeaders(res: Response) {
  res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'same-origin');
}

/**
 * `/dashboard/*`: the merchant dashboard, a single-page app built by Vite. Hashed assets are
 * cached for a year; every other path under /dashboard answers index.html (no-cache), so deep
 * links such as a hold's review_url work on a fresh page load. `/` and `/login` lead to it.
 * The app talks to the public /v1 API with the session cookie; there is no dashboard API.
 */
export function dashboardRouter(dir: string = DEFAULT_DASHBOARD_DIR): Router {
  const router = Router();
  const indexPath = join(dir, 'index.html');
  const index = existsSync(indexPath) ? readFileSync(indexPath) : null;

  router.get('/', (_req: Request, res: Response) => res.redirect(302, '/dashboard/'));
  router.get('/login', (_req: Request, res: Response) => res.redirect(302, '/dashboard/login'));

  router.use(
    '/dashboard/assets',
    express.static(join(dir, 'assets'), {
      immutable: true,
      maxAge: '365d',
      index: false,
      setHeaders: (res) => res.setHeader('X-Content-Type-Options', 'nosniff'),
    }),
  );
  // a missing asset is a 404, never the app's index.html under a script's URL
  router.use('/dashboard/assets', (_req: Request, res: Response) => sendCode(res, 'NOT_FOUND', 'No such dashboard asset.'));

  router.get('/dashboard{/*page}', (req: Request, res: Response) => {
    // relative asset URLs need the trailing slash (routing is not strict: check the raw path)
    if (req.originalUrl.split('?')[0] === '/dashboard') return res.redirect(301, '/dashboard/');
    securityHeaders(res);
    res.setHeader('Cache-Control', 'no-cache');
    if (!index) {
      res.status(503).type('text/plain').send('The dashboard has not been built: run `npm run build` (npm start builds it when it is missing).');
      return;
    }
    res.status(200).type('html').send(index);
  });
  return router;
}
