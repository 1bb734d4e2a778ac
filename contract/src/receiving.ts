import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, meta, MerchantIdQuery } from './common.js';
import { ChainName } from './chains.js';
import { ErrorBody } from './errors.js';
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
  balance: {
    method: 'GET',
    path: '/balance',
    query: MerchantIdQuery,
    responses: {
      200: z.object({
        chain: ChainName,
        address: z.string().describe('The receiving address (checksummed).'),
        asset: z.literal('USDC'),
        balance: z.string().describe('Exact decimal string: the address\'s USDC balance on chain (6 decimals).'),
        base_units: z.string().describe('The same balance in integer base units.'),
        read_at: IsoTimestamp,
      }),
      409: ErrorBody,
      503: ErrorBody,
    },
    summary: 'Read the USDC balance of the x402 receiving address on chain (live mode)',
    description:
      'balanceOf on the chain\'s USDC contract through the live facilitator\'s chain node, with a timeout. 409 RECEIVING_BALANCE_UNAVAILABLE in test mode or without x402 receiving; 503 FACILITATOR_UNAVAILABLE when the node does not answer.',
    metadata: meta({ auth: 'key', scopes: ['merchants:read'], tag: 'Receiving', operationId: 'getReceivingBalance' }),
  },
}, { pathPrefix: '/v1/receiving', commonResponses: keyErrors });
