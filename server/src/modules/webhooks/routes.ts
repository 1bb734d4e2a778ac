import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  getEvent,
  getWebhookEndpoint,
  listEvents,
  listWebhookEndpoints,
  replayEvent,
  rotateWebhookSecret,
  sendTestEvent,
  updateWebhookEndpoint,
} from './service.js';
import { authed } from '../../http/context.js';

const s = initServer();

/** Webhook endpoints and events (interface 4.11, decisions.md "Webhooks"); thin adapters. */
export const webhooksRoutes = s.router(contract.webhooks, {
  createEndpoint: async ({ req, body }) => {
    const ctx = authed(req);
    return { status: 201, body: await createWebhookEndpoint(ctx, body) };
  },
  listEndpoints: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listWebhookEndpoints(ctx, query.limit, query.cursor) };
  },
  getEndpoint: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: await getWebhookEndpoint(ctx, params.id) };
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
  sendTestEvent: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: await sendTestEvent(ctx, params.id) };
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
