import { z } from 'zod';
import { c, IsoTimestamp, idRef, keyErrors, ListQuery, listEnvelope, meta, Mode, prefixedId, Scope } from './common.js';
import { ErrorBody } from './errors.js';

export const ApiKeyObject = z.object({
  id: prefixedId('key'),
  name: z.string().nullable(),
  mode: Mode,
  scopes: z.array(Scope).describe('Every scope: a standard key. Fewer: a restricted key.'),
  restricted: z.boolean().describe('true when the key lacks at least one scope.'),
  last4: z.string().describe('The last four characters of the secret, to recognise it.'),
  created_at: IsoTimestamp,
  last_used_at: IsoTimestamp.nullable().describe('Updated at most once a minute.'),
  expires_at: IsoTimestamp.nullable().describe('Set when the key was rolled with a grace period: it stops working then.'),
  revoked_at: IsoTimestamp.nullable(),
  rolled_to: prefixedId('key').nullable().describe('The key that replaced this one in a roll.'),
});
export type ApiKeyObject = z.infer<typeof ApiKeyObject>;

export const ApiKeyWithSecret = ApiKeyObject.extend({
  secret: z.string().describe('svc_test_… or svc_live_…: shown once, in this response only.'),
});
export type ApiKeyWithSecret = z.infer<typeof ApiKeyWithSecret>;

export const CreateKeyBody = z
  .object({
    mode: Mode.describe('A key mints keys of its own mode only; a signed-in member mints both.'),
    name: z.string().trim().min(1).max(100).nullable().optional(),
    scopes: z
      .array(Scope)
      .min(1)
      .optional()
      .describe('Default: every scope of the caller. A key can never mint a scope it does not hold (403 INSUFFICIENT_SCOPE).'),
  })
  .strict();
export type CreateKeyBody = z.infer<typeof CreateKeyBody>;

export const RollKeyBody = z
  .object({
    grace_period_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400)
      .optional()
      .describe('How long the old secret keeps working: default 86400 (24 h), 0 stops it now, at most 7 days.'),
  })
  .strict();
export type RollKeyBody = z.infer<typeof RollKeyBody>;

const KeyIdParams = z.object({ id: idRef('key') });

export const keysContract = c.router({
  list: {
    method: 'GET',
    path: '',
    query: ListQuery(20),
    responses: { 200: listEnvelope(ApiKeyObject) },
    summary: 'List API keys, newest first',
    description: "The project's keys in the caller's mode, revoked and expired ones included. Secrets are never listed.",
    metadata: meta({ auth: 'key', scopes: ['keys:read'], tag: 'Keys', operationId: 'listKeys' }),
  },
  create: {
    method: 'POST',
    path: '',
    body: CreateKeyBody,
    responses: { 201: ApiKeyWithSecret },
    summary: 'Create an API key (the secret is shown once)',
    description:
      'A key can mint keys of its own mode with a subset of its own scopes (restricted keys); a test key never mints a live key (403 KEY_MODE_FORBIDDEN).',
    metadata: meta({ auth: 'key', scopes: ['keys:write'], tag: 'Keys', operationId: 'createKey' }),
  },
  roll: {
    method: 'POST',
    path: '/:id/roll',
    pathParams: KeyIdParams,
    body: RollKeyBody,
    responses: { 200: ApiKeyWithSecret, 409: ErrorBody },
    summary: 'Roll an API key: a new secret, the old one valid for a grace period',
    description:
      'The new key has the same name, mode and scopes. The caller must hold every scope of the key it rolls. A revoked or already rolled key is 409 KEY_NOT_ACTIVE.',
    metadata: meta({ auth: 'key', scopes: ['keys:write'], tag: 'Keys', operationId: 'rollKey' }),
  },
  revoke: {
    method: 'DELETE',
    path: '/:id',
    pathParams: KeyIdParams,
    body: c.noBody(),
    responses: { 200: ApiKeyObject },
    summary: 'Revoke an API key now',
    description: 'Idempotent: revoking a revoked key returns it unchanged. A key may revoke itself.',
    metadata: meta({ auth: 'key', scopes: ['keys:write'], tag: 'Keys', operationId: 'revokeKey' }),
  },
}, { pathPrefix: '/v1/keys', commonResponses: keyErrors });
