import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { toHex, type Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { ChainName } from '@svc/contract';
import { transferTypedData, type Authorization } from '../../src/lib/eip3009.js';
import type { BroadcastRecord, PaymentProof } from '../../src/rails/types.js';

export const silentLog = () => pino({ level: 'silent' });

export const nowSec = () => Math.floor(Date.now() / 1000);

/** A signed proof paying `value` base units from `payer` to `payTo`, valid from 10 minutes ago for `ttl` seconds. */
export async function signedProof(
  payer: PrivateKeyAccount,
  payTo: string,
  value: bigint,
  over: Partial<Authorization> & { chain?: ChainName; domainName?: string; ttl?: number } = {},
): Promise<PaymentProof> {
  const { chain = 'base', domainName, ttl = 600, ...auth } = over;
  const now = nowSec();
  const authorization: Authorization = {
    from: payer.address,
    to: payTo,
    value: value.toString(),
    validAfter: now - 600,
    validBefore: now + ttl,
    nonce: toHex(randomBytes(32)),
    ...auth,
  };
  const signature = await payer.signTypedData(transferTypedData(chain, authorization, domainName));
  return { chain, payTo, amountBaseUnits: value.toString(), authorization, signature };
}

/** A recordBroadcast that keeps what it is given (and can be told to run a hook first). */
export function recorder(hook?: (rec: BroadcastRecord, n: number) => Promise<void>) {
  const records: BroadcastRecord[] = [];
  const recordBroadcast = async (rec: BroadcastRecord) => {
    if (hook) await hook(rec, records.length);
    records.push(rec);
  };
  return { records, recordBroadcast };
}

/** secp256k1 order, to mirror a signature into its high-s twin. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The same signature with s' = n - s and v flipped: recovers the same signer, refused by USDC on chain. */
export function highS(sig: Hex): Hex {
  const r = sig.slice(2, 66);
  const s = N - BigInt('0x' + sig.slice(66, 130));
  const v = parseInt(sig.slice(130, 132), 16) === 27 ? 28 : 27;
  return `0x${r}${s.toString(16).padStart(64, '0')}${v.toString(16)}` as Hex;
}

/** v as 0/1 (y-parity) instead of 27/28. */
export function parityV(sig: Hex): Hex {
  const v = parseInt(sig.slice(130, 132), 16) - 27;
  return `${sig.slice(0, 130)}0${v}` as Hex;
}

/** An address with a deliberately broken EIP-55 checksum (one letter's case flipped). */
export function brokenChecksum(addr: string): string {
  const i = [...addr].findIndex((c, k) => k > 1 && /[a-fA-F]/.test(c));
  if (i < 0) return addr;
  const c = addr[i]!;
  return addr.slice(0, i) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + addr.slice(i + 1);
}
