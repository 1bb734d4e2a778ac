import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  findWebhookEndpoint,
  getEvent,
  listEvents,
  listWebhookEndpoints,
  presentEndpoint,
  replayEvent,
  rotateWebhookSecret,
  updateWebhookEndpoint,
} from '../modules/webhooks/service.js';
import { authed } from './context.js';

const s = initServer();

/** Webhook endpoints and events (interface 4.11, decisions.md "Webhooks"); thin adapters. */
export const webhooksRouter = s.router(contract.webhooks, {
  createEndpoint: async ({ req, body }) => {
    const ctx = authed(req);
    return { status: 201, body: await createWebhookEndpoint(ctx, body) };
  },
  listEndpoints: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listWebhookEndpoints(ctx.em, ctx.auth, query.limit, query.cursor) };
  },
  getEndpoint: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: presentEndpoint(await findWebhookEndpoint(ctx.em, ctx.auth, params.id)) };
  },
  updateEndpoint: async ({ req, params, body }) => {
    const ctx = authed(req);
    return { status: 200, body: await updateWebhookEndpoint(ctx, params.id, body) };
  },
  deleteEndpoint: async ({ req, params }) => {
    const ctx = authed(req);
    await deleteWebhookEndpoint(ctx, params.id);
    return { status: 204, body: undefined };
  },
  rotateSecret: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: await rotateWebhookSecret(ctx, params.id) };
  },
  listEvents: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listEvents(ctx.em, ctx.auth, query) };
  },
  getEvent: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: await getEvent(ctx.em, ctx.auth, params.id) };
  },
  replayEvent: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: await replayEvent(ctx, params.id) };
  },
});
