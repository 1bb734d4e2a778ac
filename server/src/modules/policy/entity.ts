import { defineEntity, p } from '@mikro-orm/core';

export const PolicyVersionEntity = defineEntity({
  name: 'PolicyVersion',
  tableName: 'policy_versions',
  properties: {
    id: p.string().primary(),
    merchantId: p.string(),
    version: p.integer(),
    body: p.json<Record<string, unknown>>(),
    hash: p.string(),
    active: p.boolean().default(false),
    note: p.string().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    activatedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
