import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, meta, Mode, Scope } from './common.js';
import { ErrorBody } from './errors.js';

export const Me = z.object({
  key: z
    .object({
      id: z.string(),
      name: z.string().nullable(),
      mode: Mode,
      scopes: z.array(Scope),
      last4: z.string(),
      created_at: IsoTimestamp,
    })
    .nullable()
    .describe('The calling API key; null when signed in with the session cookie.'),
  user: z
    .object({ id: z.string(), email: z.string() })
    .nullable()
    .describe('The signed-in member (session cookie); null for an API key.'),
  project: z.object({ id: z.string(), name: z.string(), organization_id: z.string() }).describe('The project of this call: the key\'s, or the one the Svc-Project header selected among the member\'s (default: their first).'),
  projects: z
    .array(z.object({ id: z.string(), name: z.string(), organization_id: z.string(), is_default: z.boolean().describe('The installation\'s default project (where `keys create` puts keys).') }))
    .describe('Projects the caller may select with Svc-Project: every project of the signed-in member\'s organizations; an API key\'s own project only.'),
  livemode: z.boolean(),
});

export const meContract = c.router({
  get: {
    method: 'GET',
    path: '',
    responses: { 200: Me },
    summary: 'Resolve the caller: the API key (or the signed-in member), mode and project',
    metadata: meta({ auth: 'key', scopes: [], tag: 'Identity', operationId: 'getMe' }),
  },
}, { pathPrefix: '/v1/me', commonResponses: keyErrors });

export const HealthOk = z.object({ ok: z.literal(true) });
export const healthContract = c.router({
  healthz: {
    method: 'GET',
    path: '/healthz',
    responses: { 200: HealthOk, 400: ErrorBody },
    summary: 'Liveness; never touches the database',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Health', operationId: 'healthz' }),
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    responses: {
      200: z.object({
        ok: z.literal(true),
        db: z.literal(true),
        live: z
          .object({
            facilitator: z.string().describe('onchain, remote, or none (live settles answer 503 FACILITATOR_UNAVAILABLE).'),
            ok: z
              .boolean()
              .describe(
                'false: live settles answer 503 FACILITATOR_UNAVAILABLE or fail (the chain node unreachable or of another chain, no contract at the USDC address, a token whose EIP-712 domain is not the one the manifest advertises, an unfunded relayer, a remote facilitator that does not list the scheme); detail.cause names the first problem in one line.',
              ),
            detail: z.record(z.string(), z.unknown()),
          })
          .describe('Live settlement readiness. It does not make the service unready: test mode and the API still work.'),
      }),
      400: ErrorBody,
      503: ErrorBody,
    },
    summary: 'Readiness: pings the database, reports live settlement (chain, token, relayer gas)',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Health', operationId: 'readyz' }),
  },
});
