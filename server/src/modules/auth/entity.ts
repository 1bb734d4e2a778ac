import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../accounts/index.js';

export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.string().primary(),
    /** As first entered; unique case-insensitively (users_email_unique on lower(email)). */
    email: p.string(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export const Membership = defineEntity({
  name: 'Membership',
  tableName: 'memberships',
  properties: {
    // Relations mapped to their keys: the unit of work inserts the user and organization first.
    userId: () => p.manyToOne(User).mapToPk().primary().fieldName('user_id'),
    organizationId: () => p.manyToOne(Organization).mapToPk().primary().fieldName('organization_id'),
    role: p.string().$type<'owner' | 'member'>(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

/** RFC 8628 device authorization: pending -> approved (a member confirmed it) -> delivered (the key went out once). */
export const DeviceCode = defineEntity({
  name: 'DeviceCode',
  tableName: 'device_codes',
  properties: {
    id: p.string().primary(),
    deviceCodeHash: p.string(),
    userCode: p.string(),
    status: p.string().$type<'pending' | 'approved' | 'delivered'>(),
    intervalSeconds: p.integer(),
    expiresAt: p.datetime().columnType('timestamptz'),
    lastPolledAt: p.datetime().columnType('timestamptz').nullable(),
    userId: p.string().nullable(),
    projectId: p.string().nullable(),
    keyId: p.string().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

/** A magic-link token: single use, 15 minutes, stored as its SHA-256. */
export const SignInToken = defineEntity({
  name: 'SignInToken',
  tableName: 'sign_in_tokens',
  properties: {
    id: p.string().primary(),
    tokenHash: p.string(),
    email: p.string(),
    deviceCodeId: p.string().nullable(),
    expiresAt: p.datetime().columnType('timestamptz'),
    usedAt: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

/** A browser session (the HTTP-only cookie holds the token; the row holds its SHA-256). */
export const UserSession = defineEntity({
  name: 'UserSession',
  tableName: 'user_sessions',
  properties: {
    id: p.string().primary(),
    tokenHash: p.string(),
    userId: p.string(),
    createdAt: p.datetime().columnType('timestamptz'),
    expiresAt: p.datetime().columnType('timestamptz'),
    revokedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
