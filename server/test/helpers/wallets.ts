import { encodeAbiParameters, encodeFunctionData, serializeErc6492Signature, type Address, type Hex, type TypedDataDefinition } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { SMART_WALLET_FACTORY_ABI, SMART_WALLET_FACTORY_RUNTIME } from '../../src/dev-chain/eip3009-token.artifact.js';
import type { Anvil } from './anvil.js';

/**
 * Smart-contract wallets on anvil (server/test/chain/SmartWallet.sol): an owner-signed ERC-1271
 * wallet made by a CREATE2 factory, installed at two addresses: one the server allows for
 * ERC-6492 (SVC_ERC6492_FACTORIES), one it does not.
 */
export const WALLET_FACTORY: Address = '0x00000000000000000000000000000000000f4c71';
export const UNLISTED_FACTORY: Address = '0x00000000000000000000000000000000000bad71';
/** anvil's first default account: unlocked, so eth_sendTransaction from it needs no key. */
const ANVIL_DEV: Address = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

export async function installWalletFactories(chain: Anvil): Promise<void> {
  for (const at of [WALLET_FACTORY, UNLISTED_FACTORY]) await chain.rpc('anvil_setCode', [at, SMART_WALLET_FACTORY_RUNTIME]);
}

/** createAccount(owner, salt) as an ERC-6492 signature carries it. */
export const createAccountCalldata = (owner: Address, salt: bigint): Hex =>
  encodeFunctionData({ abi: SMART_WALLET_FACTORY_ABI, functionName: 'createAccount', args: [owner, salt] });

/** The wallet's counterfactual address (deployed or not). */
export const walletAddress = (chain: Anvil, owner: Address, salt: bigint, factory: Address = WALLET_FACTORY): Promise<Address> =>
  chain.client.readContract({ address: factory, abi: SMART_WALLET_FACTORY_ABI, functionName: 'getAddress', args: [owner, salt] });

/** Deploys the wallet through the factory now; answers its address. */
export async function deployWallet(chain: Anvil, owner: Address, salt: bigint): Promise<Address> {
  const hash = await chain.rpc<Hex>('eth_sendTransaction', [{ from: ANVIL_DEV, to: WALLET_FACTORY, data: createAccountCalldata(owner, salt), gas: '0x100000' }]);
  const receipt = await chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== 'success') throw new Error('wallet deployment reverted');
  return walletAddress(chain, owner, salt);
}

export const hasCode = async (chain: Anvil, address: Address) => ((await chain.client.getCode({ address })) ?? '0x') !== '0x';

/**
 * A smart-account signer as a wallet SDK exposes one: `address` is the wallet, `signTypedData`
 * the owner's EIP-712 signature wrapped as the wallet expects (abi.encode(bytes): 160 bytes),
 * and ERC-6492-wrapped with the factory's calldata while the wallet is not deployed. Typed as a
 * PrivateKeyAccount for the helpers that sign with one (signPayment, @x402/evm's client).
 */
export function smartWalletSigner(
  owner: PrivateKeyAccount,
  address: Address,
  opts: { deploy?: { factory: Address; salt: bigint }; signer?: PrivateKeyAccount } = {},
): PrivateKeyAccount {
  const signTypedData = async (td: TypedDataDefinition) => {
    const ownerSig = await (opts.signer ?? owner).signTypedData(td as Parameters<PrivateKeyAccount['signTypedData']>[0]);
    const wrapped = encodeAbiParameters([{ type: 'bytes' }], [ownerSig]);
    if (!opts.deploy) return wrapped;
    return serializeErc6492Signature({ address: opts.deploy.factory, data: createAccountCalldata(owner.address, opts.deploy.salt), signature: wrapped });
  };
  return { ...owner, address, signTypedData } as unknown as PrivateKeyAccount;
}
