import { z } from 'zod';

/**
 * The token registry shared by the server and the SDKs: chains x402 settles on, their USDC
 * contract (the EIP-712 verifyingContract) and domain (interface 4.12, decisions.md).
 */
export const CHAINS = {
  base: { chainId: 8453, usdc: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', domainName: 'USD Coin', domainVersion: '2', livemode: true, explorer: 'https://basescan.org' },
  'base-sepolia': { chainId: 84532, usdc: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', domainName: 'USDC', domainVersion: '2', livemode: false, explorer: 'https://sepolia.basescan.org' },
} as const;
export type ChainName = keyof typeof CHAINS;
/** A chain of the registry, as a schema. */
export const ChainName = z.enum(Object.keys(CHAINS) as [ChainName, ...ChainName[]]);

/** EIP-3009 TransferWithAuthorization, the typed data an agent signs and the gate verifies. */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;
