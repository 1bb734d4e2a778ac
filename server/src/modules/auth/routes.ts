import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed, ctxOf, publicBaseUrl } from '../../http/context.js';
import { clearSessionCookie, setSessionCookie } from '../../http/session-cookie.js';
import { approveDevice, endSession, pollDeviceSignIn, startDeviceSignIn, startEmailSignIn, verifySignIn } from './service.js';

const s = initServer();

/** /v1/auth: magic link, browser sessions and the CLI's device-code flow (decisions.md "Sign-in and keys"). */
export const authRoutes = s.router(contract.auth, {
  emailStart: async ({ req, body }) => ({ status: 200, body: await startEmailSignIn(ctxOf(req), body, req.ip ?? 'unknown', publicBaseUrl(req)) }),
  verify: async ({ req, res, query }) => {
    const ctx = ctxOf(req);
    const out = await verifySignIn(ctx, query.token);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    if (out.status === 410) return { status: 410, body: out.html };
    setSessionCookie(res, ctx.services.config, out.sessionToken, out.maxAgeSeconds);
    res.setHeader('Location', out.location);
    return { status: 303, body: undefined };
  },
  logout: async ({ req, res }) => {
    const ctx = authed(req);
    await endSession(ctx);
    clearSessionCookie(res, ctx.services.config);
    return { status: 200, body: { ok: true } };
  },
  cliStart: async ({ req }) => ({ status: 200, body: await startDeviceSignIn(ctxOf(req), req.ip ?? 'unknown', publicBaseUrl(req)) }),
  cliPoll: async ({ req, body }) => ({ status: 200, body: await pollDeviceSignIn(ctxOf(req), body.device_code) }),
  cliApprove: async ({ req, body }) => {
    await approveDevice(authed(req), body.user_code);
    return { status: 200, body: { ok: true } };
  },
  // the device page is the dashboard's; this older address leads there
  device: async ({ res, query }) => {
    res.setHeader('Location', `/dashboard/device${query.user_code ? `?user_code=${encodeURIComponent(query.user_code)}` : ''}`);
    return { status: 303, body: undefined };
  },
});
