import { defineEntity, p } from '@mikro-orm/core';
import type { WebhookEndpointStatus } from '@svc/contract';

export type { WebhookEndpointStatus };

/** A receiver of signed events; the queue tables (deliveries, attempts) are plain SQL in store.ts. */
export const WebhookEndpointEntity = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  properties: {
    id: p.string().primary(),
    projectId: p.string(),
    livemode: p.boolean(),
    url: p.string(),
    enabledEvents: p.json<string[]>(),
    description: p.string().nullable(),
    status: p.string().$type<WebhookEndpointStatus>(),
    disabledReason: p.string().$type<'manual' | 'failing'>().nullable(),
    /** AES-256-GCM sealed `whsec_` secret, bound to the endpoint id; never leaves the server. */
    secretSealed: p.string().hidden(),
    previousSecretSealed: p.string().nullable().hidden(),
    previousSecretExpiresAt: p.datetime().columnType('timestamptz').nullable(),
    failingSince: p.datetime().columnType('timestamptz').nullable(),
    lastSuccessAt: p.datetime().columnType('timestamptz').nullable(),
    deletedAt: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    updatedAt: p.datetime().columnType('timestamptz'),
  },
});

export type WebhookEndpointRow = InstanceType<typeof WebhookEndpointEntity.class>;
