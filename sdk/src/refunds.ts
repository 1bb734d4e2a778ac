import { TRANSFER_WITH_AUTHORIZATION_TYPES, type Refund } from '@svc/contract';
import type { Address, Hex, JsonRpcAccount, LocalAccount, WalletClient } from 'viem';
import { SvcError } from './errors.js';

/**
 * Signing a refund (docs/settlement.md "Refunds"): the service never holds funds, so the money
 * goes back from the merchant's own receiving wallet. `refunds.create` answers the EIP-3009
 * TransferWithAuthorization to sign (`authorization_request.typed_data`); the merchant signs it
 * with the receiving address's key and passes the signature to `refunds.authorize`:
 *
 * ```ts
 * const refund = await svc.refunds.create({ order_id: 'ord_...', reason: 'requested_by_customer' });
 * const signature = await signRefund(account, refund);
 * const done = await svc.refunds.authorize(refund.id, { signature });
 * ```
 *
 * This file imports viem for types only, so the dashboard bundles `refundTypedDataV4` without it.
 */

/** A refund that cannot be signed: not awaiting authorization, or the account is not its `from`. */
export class RefundSigningError extends SvcError {
  override readonly name: string = 'RefundSigningError';
}

/** The refund's typed data as viem's `signTypedData` takes it (bigints for the uint256 fields). */
export type RefundTypedDataToSign = {
  domain: { name: string; version: string; chainId: number; verifyingContract: Address };
  types: typeof TRANSFER_WITH_AUTHORIZATION_TYPES;
  primaryType: 'TransferWithAuthorization';
  message: { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };
};

function typedDataOf(refund: Pick<Refund, 'id' | 'status' | 'authorization_request'>): NonNullable<Refund['authorization_request']>['typed_data'] {
  if (refund.status !== 'requires_authorization' || !refund.authorization_request) {
    throw new RefundSigningError(`refund ${refund.id} is ${refund.status}, not requires_authorization: there is nothing to sign`);
  }
  return refund.authorization_request.typed_data;
}

/**
 * The typed data of `refund.authorization_request` for viem, with the contract's
 * TransferWithAuthorization types (not the answer's, so a tampered answer cannot change what
 * is signed beyond its values).
 */
export function refundTypedData(refund: Pick<Refund, 'id' | 'status' | 'authorization_request'>): RefundTypedDataToSign {
  const td = typedDataOf(refund);
  return {
    domain: { ...td.domain, verifyingContract: td.domain.verifyingContract as Address },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: td.message.from as Address,
      to: td.message.to as Address,
      value: BigInt(td.message.value),
      validAfter: BigInt(td.message.validAfter),
      validBefore: BigInt(td.message.validBefore),
      nonce: td.message.nonce as Hex,
    },
  };
}

/**
 * The JSON an EIP-1193 wallet takes for `eth_signTypedData_v4` (params `[from, json]`): the
 * typed data with its EIP712Domain type and the uint256 values as decimal strings.
 */
export function refundTypedDataV4(refund: Pick<Refund, 'id' | 'status' | 'authorization_request'>): string {
  const td = typedDataOf(refund);
  return JSON.stringify({
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      ...TRANSFER_WITH_AUTHORIZATION_TYPES,
    },
    primaryType: 'TransferWithAuthorization',
    domain: td.domain,
    message: { ...td.message, validAfter: String(td.message.validAfter), validBefore: String(td.message.validBefore) },
  });
}

export type RefundSigner = LocalAccount | JsonRpcAccount;

/**
 * Signs `refund.authorization_request` (EIP-712) with the merchant's receiving account and
 * returns the signature for `refunds.authorize(refund.id, { signature })`. A local account
 * (`privateKeyToAccount`) signs itself; a JSON-RPC account needs `walletClient`. Throws
 * RefundSigningError before signing when the refund is not awaiting authorization or the
 * account is not the transfer's `from` (the server would answer SIGNER_MISMATCH).
 */
export async function signRefund(
  account: RefundSigner,
  refund: Pick<Refund, 'id' | 'status' | 'authorization_request'>,
  options: { walletClient?: WalletClient | undefined } = {},
): Promise<Hex> {
  const td = refundTypedData(refund);
  if (account.address.toLowerCase() !== td.message.from.toLowerCase()) {
    throw new RefundSigningError(`refund ${refund.id} must be signed by ${td.message.from} (the receiving address the order was paid to), not ${account.address}`);
  }
  if (account.type === 'local') return account.signTypedData(td);
  if (!options.walletClient) throw new TypeError('a JSON-RPC account needs walletClient to sign typed data');
  return options.walletClient.signTypedData({ ...td, account });
}
