import { z } from 'zod';
import { c, keyErrors, meta, MerchantIdQuery } from './common.js';
import { RailName, Receiving, ReceivingInput } from './merchants.js';

export const receivingContract = c.router({
  get: {
    method: 'GET',
    path: '',
    query: MerchantIdQuery,
    responses: { 200: z.object({ receiving: Receiving, rails: z.array(RailName) }) },
    summary: 'Read the receiving configuration',
    metadata: meta({ auth: 'key', scopes: ['merchants:read'], tag: 'Receiving', operationId: 'getReceiving' }),
  },
  put: {
    method: 'PUT',
    path: '',
    query: MerchantIdQuery,
    body: z.object({ receiving: ReceivingInput }).strict(),
    responses: { 200: z.object({ receiving: Receiving }) },
    summary: 'Replace the receiving configuration',
    description: 'Validated with the RECEIVING_* codes; addresses are checksummed and assets upper-cased.',
    metadata: meta({ auth: 'key', scopes: ['merchants:write'], tag: 'Receiving', operationId: 'putReceiving' }),
  },
}, { pathPrefix: '/v1/receiving', commonResponses: keyErrors });
