import { defineEntity, p } from '@mikro-orm/core';

export const Organization = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});

export const Project = defineEntity({
  name: 'Project',
  tableName: 'projects',
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    name: p.string(),
    isDefault: p.boolean().default(false),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});

export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.string().primary(),
    projectId: p.string(),
    mode: p.string().$type<'test' | 'live'>(),
    name: p.string().nullable(),
    /** First 16 hex characters of the secret's sha256: the index lookup; the full hash is compared in constant time. */
    lookup: p.string(),
    secretHash: p.string(),
    last4: p.string().fieldNames('last4'),
    scopes: p.json<string[]>(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
    revokedAt: p.datetime().columnType('timestamptz').nullable(),
    lastUsedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
