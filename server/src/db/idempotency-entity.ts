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
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});
