import { defineEntity, p } from '@mikro-orm/core';

export const IdempotencyRecord = defineEntity({
  name: 'IdempotencyRecord',
  tableName: 'idempotency_keys',
  properties: {
    id: p.string().primary(),
    scopeKey: p.string(),
    idemKey: p.string(),
    requestHash: p.string(),
    status: p.integer().nullable(),
    response: p.json<unknown>().nullable(),
    /** While status is null: the lease of the request that holds the key (renewed as it runs). */
    lockedUntil: p.datetime().columnType('timestamptz').nullable(),
    /** The token of the request holding the lease. */
    lockOwner: p.string().nullable(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});
