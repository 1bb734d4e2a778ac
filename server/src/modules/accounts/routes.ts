import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { listKeys, mintKey, revokeKey, rollKey } from './keys.js';

const s = initServer();

/** /v1/keys: list, mint (standard or restricted), roll with a grace period, revoke. */
export const keysRoutes = s.router(contract.keys, {
  list: async ({ req, query }) => ({ status: 200, body: await listKeys(authed(req), query) }),
  create: async ({ req, body }) => ({ status: 201, body: await mintKey(authed(req), body) }),
  roll: async ({ req, params, body }) => ({ status: 200, body: await rollKey(authed(req), params.id, body) }),
  revoke: async ({ req, params }) => ({ status: 200, body: await revokeKey(authed(req), params.id) }),
});
