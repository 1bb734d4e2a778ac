import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, meta, Scope } from './common.js';

export const Me = z.object({
  key: z.object({
    id: z.string(),
    name: z.string().nullable(),
    mode: z.enum(['test', 'live']),
    scopes: z.array(Scope),
    last4: z.string(),
    created_at: IsoTimestamp,
  }),
  project: z.object({ id: z.string(), name: z.string(), organization_id: z.string() }),
  livemode: z.boolean(),
});

export const meContract = c.router({
  get: {
    method: 'GET',
    path: '/v1/me',
    responses: { 200: Me, ...keyErrors },
    summary: 'Resolve the API key: its mode, scopes and project',
    metadata: meta({ auth: 'key', scopes: [], tag: 'Identity', operationId: 'getMe' }),
  },
});

export const HealthOk = z.object({ ok: z.literal(true) });
export const healthContract = c.router({
  healthz: {
    method: 'GET',
    path: '/healthz',
    responses: { 200: HealthOk },
    summary: 'Liveness; never touches the database',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Health', operationId: 'healthz' }),
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    responses: { 200: z.object({ ok: z.literal(true), db: z.literal(true) }), 503: z.object({ reason_codes: z.array(z.string()), error_human: z.string() }) },
    summary: 'Readiness; pings the database with a short timeout',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Health', operationId: 'readyz' }),
  },
});
