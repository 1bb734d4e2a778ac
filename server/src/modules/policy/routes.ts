import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { getPolicy, listPolicyVersions, publishConfig, putPolicy, validateConfig } from './service.js';

const s = initServer();

/** /v1/policy: versions, validation and publish. */
export const policyRoutes = s.router(contract.policy, {
  get: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await getPolicy(ctx.em, ctx.auth, query.merchant_id) };
  },
  versions: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listPolicyVersions(ctx.em, ctx.auth, query) };
  },
  put: async ({ req, query, body }) => ({ status: 201, body: await putPolicy(authed(req), query.merchant_id, body.body, body.note) }),
  validate: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await validateConfig(ctx.em, ctx.auth, query.merchant_id) };
  },
  publish: async ({ req, query }) => ({ status: 200, body: await publishConfig(authed(req), query.merchant_id) }),
});
