import { keccak_256 } from '@noble/hashes/sha3';
import { domainSeparator, getAddress, hexToBytes, recoverAddress, toHex, type Address, type Hex } from 'viem';
import { CHAINS, TRANSFER_WITH_AUTHORIZATION_TYPES, type ChainName, type ReasonCode, type X402Authorization } from '@svc/contract';
import { nativeSecp256k1, recoverAddressNative } from './secp256k1-native.js';

/**
 * EIP-3009 TransferWithAuthorization, pure: signature canonical form, typed data, signer
 * recovery and the off-chain proof check. Shared by the gate and every facilitator (rails/),
 * so it knows no module.
 */

/**
 * An EIP-3009 TransferWithAuthorization in its canonical form (value as an integer string,
 * times as integers). The wire (X402Authorization) also takes the times as decimal strings,
 * as @x402/evm sends them; the transport adapters (modules/x402) convert before the gate.
 */
export type Authorization = Omit<X402Authorization, 'validAfter' | 'validBefore'> & { validAfter: number; validBefore: number };

/**
 * On success, the canonical authorization and signature: the form USDC accepts on chain. A
 * refusal with `contract` passed every check but the signer: the signature is not an ECDSA
 * signature by `from`, but it may be a smart-contract wallet's (EIP-1271, ERC-6492), which only
 * the chain can judge (rails/contract-wallets.ts); `contract` is the authorization in canonical
 * form and the signature as sent (lower-cased).
 */
export type AuthorizationCheck =
  | { ok: true; authorization: Authorization; signature: Hex }
  | { ok: false; code: ReasonCode; human: string; contract?: { authorization: Authorization; signature: Hex } };

/** secp256k1 group order n, and n/2: USDC (like OpenZeppelin's ECDSA) accepts only s <= n/2. */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const HALF_N = SECP256K1_N / 2n;

/**
 * The one canonical form of a 65-byte signature: v as 27/28 (0/1 are accepted as y-parity)
 * and s in the lower half (a high s is the same signature mirrored: s' = n - s, v flipped).
 * Both forms recover the same signer, but FiatToken refuses all but this one on chain, so
 * test and live mode broadcast and accept the same bytes. Null when v is neither.
 */
export function canonicalSignature(signature: Hex): Hex | null {
  const r = signature.slice(2, 66);
  let s = BigInt('0x' + signature.slice(66, 130));
  let v = parseInt(signature.slice(130, 132), 16);
  if (v === 0 || v === 1) v += 27;
  if (v !== 27 && v !== 28) return null;
  if (s === 0n || s >= SECP256K1_N) return null;
  if (s > HALF_N) {
    s = SECP256K1_N - s;
    v = v === 27 ? 28 : 27;
  }
  return `0x${r}${s.toString(16).padStart(64, '0')}${v.toString(16)}` as Hex;
}

/** Seconds an authorization must still be valid for when it reaches us (decisions.md: validBefore < now + 6 s is expired). */
export const MIN_VALIDITY_SECONDS = 6;

const ADDRESS_RE = /^0x[0-9a-fA-F]{40}$/;
const NONCE_RE = /^0x[0-9a-fA-F]{64}$/;
/** The longest payment signature taken: a smart wallet's (a passkey signature, ERC-6492-wrapped with its factory calldata, is under 2 KB). */
export const MAX_SIGNATURE_BYTES = 4096;
const SIGNATURE_RE = new RegExp(`^0x(?:[0-9a-fA-F]{2}){65,${MAX_SIGNATURE_BYTES}}$`);
const ECDSA_SIGNATURE_RE = /^0x[0-9a-fA-F]{130}$/;
const UINT_RE = /^\d+$/;
const UINT256_MAX = (1n << 256n) - 1n;

/**
 * The EIP-712 typed data the USDC contract verifies. The domain's verifyingContract is the
 * chain's USDC token, never payTo. `domainName` overrides the registry name (only to build
 * what a misconfigured client would sign); verification always uses the registry.
 * Addresses are lower-cased: ABI encoding ignores case, and a bad EIP-55 checksum must not throw.
 */
export function transferTypedData(chain: ChainName, auth: Authorization, domainName?: string) {
  const c = CHAINS[chain];
  return {
    domain: {
      name: domainName ?? c.domainName,
      version: c.domainVersion,
      chainId: c.chainId,
      verifyingContract: c.usdc as Address,
    },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization' as const,
    message: {
      from: auth.from.toLowerCase() as Address,
      to: auth.to.toLowerCase() as Address,
      value: BigInt(auth.value),
      validAfter: BigInt(auth.validAfter),
      validBefore: BigInt(auth.validBefore),
      nonce: auth.nonce as Hex,
    },
  };
}

/**
 * The EIP-712 digest of a TransferWithAuthorization: what viem's `hashTypedData` of
 * `transferTypedData(chain, auth)` returns, computed from its fixed layout instead: the
 * chain's domain separator (computed at load), then two keccak-256 (the struct, then 0x1901 ‖
 * domain ‖ struct) over 224 and 66 bytes. viem's generic encoder takes 0.14 ms for the same answer on
 * the settle's request thread; unit/eip712.test.ts checks the two agree.
 */
export function transferDigest(chain: ChainName, auth: Authorization): Hex {
  const words = new Uint8Array(32 * 7);
  words.set(TRANSFER_TYPEHASH, 0);
  words.set(hexToBytes(auth.from as Hex), 32 + 12);
  words.set(hexToBytes(auth.to as Hex), 64 + 12);
  putUint256(words, 96, BigInt(auth.value));
  putUint256(words, 128, BigInt(auth.validAfter));
  putUint256(words, 160, BigInt(auth.validBefore));
  words.set(hexToBytes(auth.nonce as Hex), 192);
  const message = new Uint8Array(66);
  message[0] = 0x19;
  message[1] = 0x01;
  message.set(DOMAIN_SEPARATORS[chain], 2);
  message.set(keccak_256(words), 34);
  return toHex(keccak_256(message));
}

/** The struct's fields in the order the digest lays them out; the contract's type list must match it. */
const TRANSFER_FIELDS = [
  ['from', 'address'],
  ['to', 'address'],
  ['value', 'uint256'],
  ['validAfter', 'uint256'],
  ['validBefore', 'uint256'],
  ['nonce', 'bytes32'],
] as const;
const declared = TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization;
if (declared.length !== TRANSFER_FIELDS.length || declared.some((f, i) => f.name !== TRANSFER_FIELDS[i]![0] || f.type !== TRANSFER_FIELDS[i]![1])) {
  throw new Error('TRANSFER_WITH_AUTHORIZATION_TYPES no longer matches the layout transferDigest encodes');
}
const TRANSFER_TYPEHASH = keccak_256(`TransferWithAuthorization(${TRANSFER_FIELDS.map(([name, type]) => `${type} ${name}`).join(',')})`);
/** Each chain's EIP-712 domain separator, computed once at load: a constant of the registry, not a cache. */
const DOMAIN_SEPARATORS = Object.fromEntries(
  (Object.keys(CHAINS) as ChainName[]).map((chain) => [
    chain,
    hexToBytes(domainSeparator({ domain: transferTypedData(chain, { from: '0x', to: '0x', value: '0', validAfter: 0, validBefore: 0, nonce: '0x' }).domain })),
  ]),
) as Record<ChainName, Uint8Array>;
function putUint256(out: Uint8Array, offset: number, n: bigint) {
  if (n < 0n || n > UINT256_MAX) throw new RangeError('uint256 out of range');
  for (let i = 31; i >= 0 && n > 0n; i--, n >>= 8n) out[offset + i] = Number(n & 0xffn);
}

/** secp256k1 public-key recovery of a 32-byte digest and a 65-byte signature (the expensive step of a settle). */
export type RecoverSigner = (digest: Hex, signature: Hex) => Promise<Address>;

/**
 * On the calling thread: libsecp256k1 where its native binding loads (lib/secp256k1-native.ts),
 * else viem's pure-JavaScript recovery. The default of pure callers (unit tests, a facilitator
 * built without services), and what services.signers runs when the binding is there.
 */
export const recoverOnThisThread: RecoverSigner = async (digest, signature) => {
  const native = nativeSecp256k1();
  return native ? recoverAddressNative(native, digest, signature) : recoverAddress({ hash: digest, signature });
};

/** viem's pure-JavaScript recovery on the calling thread, whatever else this platform has. */
export const recoverInJavaScript: RecoverSigner = (digest, signature) => recoverAddress({ hash: digest, signature });

/**
 * A bounded memo of recovered authorization signers, oldest-first evicted. A settle checks one
 * proof twice (the gate's verify, then the facilitator's settle): the second check is a lookup,
 * keyed on everything the digest is made of, instead of the digest and a recovery (0.05 ms
 * native, 1.4 ms in JavaScript). A pure function's memo: it changes nothing but speed. The
 * server's is held by services.signers (lib/signer-recovery.ts), one per process.
 */
export class RecoveredSigners {
  private readonly byProof = new Map<string, Address>();
  constructor(private readonly max = 4096) {}

  get(key: string): Address | undefined {
    return this.byProof.get(key);
  }

  remember(key: string, signer: Address): void {
    if (this.byProof.size >= this.max) this.byProof.delete(this.byProof.keys().next().value!);
    this.byProof.set(key, signer);
  }
}

/**
 * How a payment signer is recovered: `recover` does the curve arithmetic (the server passes
 * services.signers: its worker-thread pool, lib/signer-recovery.ts, and its memo `recovered`).
 * Without one, or without a memo, recovery runs on this thread and remembers nothing.
 */
export type Signers = { readonly recover: RecoverSigner; readonly recovered?: RecoveredSigners };

/** The one place a payment signer is recovered (STACK.md: the most expensive step of a settle). */
export async function recoverAuthorizationSigner(chain: ChainName, auth: Authorization, signature: Hex, signers?: Signers): Promise<Address> {
  const key = `${chain}|${auth.from}|${auth.to}|${auth.value}|${auth.validAfter}|${auth.validBefore}|${auth.nonce}|${signature.toLowerCase()}`;
  const known = signers?.recovered?.get(key);
  if (known) return known;
  const signer = await (signers?.recover ?? recoverOnThisThread)(transferDigest(chain, auth), signature);
  signers?.recovered?.remember(key, signer);
  return signer;
}

const fail = (code: ReasonCode, human: string): AuthorizationCheck => ({ ok: false, code, human });

const isTimestamp = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/**
 * Everything a facilitator checks off-chain, in a fixed order so the first failing check
 * names the code: shape, recipient, amount, validity window, then signer recovery.
 */
export async function checkAuthorization(input: {
  chain: ChainName;
  payTo: string;
  amountBaseUnits: string;
  auth: Authorization;
  signature: string;
  nowSec: number;
  /** Signer recovery and its memo (services.signers); on this thread when absent. */
  signers?: Signers;
}): Promise<AuthorizationCheck> {
  const { chain, payTo, amountBaseUnits, auth, signature, nowSec } = input;
  if (!Object.hasOwn(CHAINS, chain)) return fail('PAYMENT_MALFORMED', `Unknown chain ${String(chain)}.`);
  if (typeof auth !== 'object' || auth === null) return fail('PAYMENT_MALFORMED', 'payment.authorization must be an object.');
  if (typeof auth.from !== 'string' || !ADDRESS_RE.test(auth.from)) {
    return fail('PAYMENT_MALFORMED', 'payment.authorization.from must be a 20-byte 0x-prefixed hex address.');
  }
  if (typeof auth.to !== 'string' || !ADDRESS_RE.test(auth.to)) {
    return fail('PAYMENT_MALFORMED', 'payment.authorization.to must be a 20-byte 0x-prefixed hex address.');
  }
  if (typeof auth.value !== 'string' || !UINT_RE.test(auth.value) || BigInt(auth.value) > UINT256_MAX) {
    return fail('PAYMENT_MALFORMED', 'payment.authorization.value must be a non-negative integer string of base units.');
  }
  if (!isTimestamp(auth.validAfter) || !isTimestamp(auth.validBefore)) {
    return fail('PAYMENT_MALFORMED', 'payment.authorization.validAfter and validBefore must be non-negative integer unix seconds.');
  }
  if (typeof auth.nonce !== 'string' || !NONCE_RE.test(auth.nonce)) {
    return fail('PAYMENT_MALFORMED', 'payment.authorization.nonce must be 0x followed by 64 hex characters (32 bytes).');
  }
  if (typeof signature !== 'string' || !SIGNATURE_RE.test(signature)) {
    return fail(
      'PAYMENT_MALFORMED',
      `payment.signature must be 0x-prefixed hex of 65 to ${MAX_SIGNATURE_BYTES} bytes (65: an EOA's ECDSA signature; longer: a smart wallet's).`,
    );
  }

  if (auth.to.toLowerCase() !== payTo.toLowerCase()) {
    return fail('PAYMENT_RECIPIENT_MISMATCH', `authorization.to must be the merchant's payTo ${payTo}, got ${auth.to}.`);
  }
  if (!UINT_RE.test(amountBaseUnits) || BigInt(auth.value) !== BigInt(amountBaseUnits)) {
    return fail('PAYMENT_AMOUNT_MISMATCH', `authorization.value must be exactly amountBaseUnits ${amountBaseUnits}, got ${auth.value}.`);
  }
  if (auth.validAfter > nowSec) {
    return fail('PAYMENT_NOT_YET_VALID', `The authorization is valid only after ${auth.validAfter} (now ${nowSec}); use a validAfter in the past.`);
  }
  if (auth.validBefore < nowSec + MIN_VALIDITY_SECONDS) {
    return fail(
      'PAYMENT_EXPIRED',
      `validBefore ${auth.validBefore} must be at least ${MIN_VALIDITY_SECONDS} s after now (${nowSec}); sign a new authorization.`,
    );
  }

  const authorization = { ...auth, from: getAddress(auth.from.toLowerCase()), to: getAddress(auth.to.toLowerCase()), nonce: auth.nonce.toLowerCase() };
  // Not an EOA's signature by `from`: perhaps a smart wallet's, which the chain judges.
  const notEcdsa = (code: ReasonCode, human: string): AuthorizationCheck => ({ ok: false, code, human, contract: { authorization, signature: signature.toLowerCase() as Hex } });
  const domain = `{name: "${CHAINS[chain].domainName}", version: "${CHAINS[chain].domainVersion}"}`;
  if (!ECDSA_SIGNATURE_RE.test(signature)) {
    return notEcdsa('SIGNER_MISMATCH', `payment.signature is not a 65-byte ECDSA signature, and authorization.from ${auth.from} is not known as a smart-contract wallet whose signature it is.`);
  }
  const canonical = canonicalSignature(signature.toLowerCase() as Hex);
  if (!canonical) {
    return notEcdsa('SIGNER_MISMATCH', 'payment.signature has v other than 27/28 (or 0/1) or an s outside the curve order; sign the EIP-712 typed data again.');
  }

  let signer: Address;
  try {
    signer = await recoverAuthorizationSigner(chain, auth, canonical, input.signers);
  } catch {
    return notEcdsa('SIGNER_MISMATCH', `The signature could not be recovered; sign the EIP-712 domain ${domain} on ${chain}.`);
  }
  if (signer.toLowerCase() !== auth.from.toLowerCase()) {
    return notEcdsa(
      'SIGNER_MISMATCH',
      `The signature recovers to ${signer}, not authorization.from ${auth.from}; sign the EIP-712 domain ${domain} on ${chain} with the payer's key.`,
    );
  }
  return { ok: true, authorization, signature: canonical };
}

/**
 * The off-chain checks every facilitator runs on a transport-neutral proof; on success the
 * proof in its canonical form (the one to settle).
 */
export async function checkProof(
  proof: { chain: ChainName; payTo: string; amountBaseUnits: string; authorization: Authorization; signature: Hex },
  nowSec: number,
  signers?: Signers,
): Promise<{ ok: true; proof: typeof proof } | { ok: false; code: ReasonCode; human: string; contract?: typeof proof }> {
  const check = await checkAuthorization({
    chain: proof.chain,
    payTo: proof.payTo,
    amountBaseUnits: proof.amountBaseUnits,
    auth: proof.authorization,
    signature: proof.signature,
    nowSec,
    ...(signers ? { signers } : {}),
  });
  if (!check.ok) {
    const { contract, ...refusal } = check;
    return contract ? { ...refusal, contract: { ...proof, ...contract } } : refusal;
  }
  return { ok: true, proof: { ...proof, authorization: check.authorization, signature: check.signature } };
}
