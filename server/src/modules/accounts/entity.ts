import { defineEntity, p } from '@mikro-orm/core';
import type { Mode } from '@svc/contract';

export const Organization = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export const Project = defineEntity({
  name: 'Project',
  tableName: 'projects',
  properties: {
    id: p.string().primary(),
    /** A relation mapped to its key: the unit of work inserts the organization first. */
    organizationId: () => p.manyToOne(Organization).mapToPk().fieldName('organization_id'),
    name: p.string(),
    isDefault: p.boolean().default(false),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.string().primary(),
    projectId: p.string(),
    mode: p.string().$type<Mode>(),
    name: p.string().nullable(),
    /** First 16 hex characters of the secret's sha256: the index lookup; the full hash is compared in constant time. */
    lookup: p.string(),
    secretHash: p.string(),
    last4: p.string().fieldNames('last4'),
    scopes: p.json<string[]>(),
    createdAt: p.datetime().columnType('timestamptz'),
    revokedAt: p.datetime().columnType('timestamptz').nullable(),
    lastUsedAt: p.datetime().columnType('timestamptz').nullable(),
    /** A rolled key works until then (its grace period). */
    expiresAt: p.datetime().columnType('timestamptz').nullable(),
    /** The key that replaced this one in a roll. */
    rolledTo: p.string().nullable(),
  },
});
