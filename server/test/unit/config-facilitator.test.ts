import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configFailure as failure } from '../helpers/config.js';

const KEY1 = '0x' + '11'.repeat(32);
const KEY2 = '0x' + 'ab'.repeat(32);
const RPC = 'https://base.example.com/v1/abc';

describe('live facilitator configuration', () => {
  it('unset SVC_LIVE_FACILITATOR needs nothing else', () => {
    const c = loadConfig({});
    expect(c.SVC_LIVE_FACILITATOR).toBeUndefined();
  });

  it('onchain: RPC URL and relayer keys parsed (keys trimmed, min balance as bigint)', () => {
    const c = loadConfig({
      SVC_LIVE_FACILITATOR: 'onchain',
      SVC_RPC_URL_BASE: RPC,
      SVC_RELAYER_PRIVATE_KEYS: ` ${KEY1} , ${KEY2}`,
      SVC_RELAYER_MIN_BALANCE_WEI: '1000000000000000',
    });
    expect(c.SVC_RELAYER_PRIVATE_KEYS).toEqual([KEY1, KEY2]);
    expect(c.SVC_RELAYER_MIN_BALANCE_WEI).toBe(1_000_000_000_000_000n);
  });

  it('remote: URL and the auth header in both forms', () => {
    const base = { SVC_LIVE_FACILITATOR: 'remote', SVC_RPC_URL_BASE: RPC, SVC_FACILITATOR_URL: 'https://facilitator.example.com' };
    expect(loadConfig(base).SVC_FACILITATOR_AUTH_HEADER).toBeUndefined();
    expect(loadConfig({ ...base, SVC_FACILITATOR_AUTH_HEADER: 'Authorization: Bearer abc' }).SVC_FACILITATOR_AUTH_HEADER).toEqual({ name: 'Authorization', value: 'Bearer abc' });
    expect(loadConfig({ ...base, SVC_FACILITATOR_AUTH_HEADER: 'X-Api-Key: k1' }).SVC_FACILITATOR_AUTH_HEADER).toEqual({ name: 'X-Api-Key', value: 'k1' });
    expect(loadConfig({ ...base, SVC_FACILITATOR_AUTH_HEADER: 'Bearer abc' }).SVC_FACILITATOR_AUTH_HEADER).toEqual({ name: 'Authorization', value: 'Bearer abc' });
  });

  it('smart-contract wallets: SVC_ERC6492_FACTORIES is a lower-cased address list (unset: none), SVC_RPC_URL_BASE_SEPOLIA an http(s) URL', () => {
    expect(loadConfig({}).SVC_ERC6492_FACTORIES).toEqual([]);
    expect(loadConfig({ SVC_ERC6492_FACTORIES: ' 0x0BA5ED0c6AA8c49038F819E587E2633c4A9F428a , ' }).SVC_ERC6492_FACTORIES).toEqual(['0x0ba5ed0c6aa8c49038f819e587e2633c4a9f428a']);
    expect(loadConfig({ SVC_RPC_URL_BASE_SEPOLIA: 'https://sepolia.base.org' }).SVC_RPC_URL_BASE_SEPOLIA).toBe('https://sepolia.base.org');
  });

  it('each bad value is one line naming the variable, never echoing a key', () => {
    const cases: [Record<string, string>, string][] = [
      [{ SVC_LIVE_FACILITATOR: 'stripe' }, 'invalid configuration: SVC_LIVE_FACILITATOR must be onchain or remote'],
      [{ SVC_LIVE_FACILITATOR: 'onchain' }, 'invalid configuration: SVC_RPC_URL_BASE is required when SVC_LIVE_FACILITATOR=onchain'],
      [{ SVC_LIVE_FACILITATOR: 'remote' }, 'invalid configuration: SVC_RPC_URL_BASE is required when SVC_LIVE_FACILITATOR=remote'],
      [{ SVC_LIVE_FACILITATOR: 'onchain', SVC_RPC_URL_BASE: RPC }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS is required when SVC_LIVE_FACILITATOR=onchain'],
      [{ SVC_LIVE_FACILITATOR: 'remote', SVC_RPC_URL_BASE: RPC }, 'invalid configuration: SVC_FACILITATOR_URL is required when SVC_LIVE_FACILITATOR=remote'],
      [{ SVC_RPC_URL_BASE: 'ws://node:8546' }, 'invalid configuration: SVC_RPC_URL_BASE must be an http(s) URL'],
      [{ SVC_RPC_URL_BASE: 'not a url' }, 'invalid configuration: SVC_RPC_URL_BASE must be an http(s) URL'],
      [{ SVC_FACILITATOR_URL: 'ftp://f.example.com' }, 'invalid configuration: SVC_FACILITATOR_URL must be an http(s) URL'],
      [{ SVC_RELAYER_PRIVATE_KEYS: `${KEY1},0x1234` }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS entry 2 is not a 0x-prefixed 32-byte hex secp256k1 private key'],
      [{ SVC_RELAYER_PRIVATE_KEYS: '11'.repeat(32) }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS entry 1 is not a 0x-prefixed 32-byte hex secp256k1 private key'],
      [{ SVC_RELAYER_PRIVATE_KEYS: '0x' + '00'.repeat(32) }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS entry 1 is not a 0x-prefixed 32-byte hex secp256k1 private key'],
      [{ SVC_RELAYER_PRIVATE_KEYS: '0x' + 'ff'.repeat(32) }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS entry 1 is not a 0x-prefixed 32-byte hex secp256k1 private key'],
      [{ SVC_RELAYER_PRIVATE_KEYS: `${KEY1},${KEY1.toUpperCase().replace('0X', '0x')}` }, 'invalid configuration: SVC_RELAYER_PRIVATE_KEYS lists the same key twice'],
      [{ SVC_RELAYER_MIN_BALANCE_WEI: '1.5' }, 'invalid configuration: SVC_RELAYER_MIN_BALANCE_WEI must be a non-negative integer number of wei'],
      [{ SVC_FACILITATOR_AUTH_HEADER: 'X-Key: a\nb' }, 'invalid configuration: SVC_FACILITATOR_AUTH_HEADER must be one line'],
      [{ SVC_ERC6492_FACTORIES: '0x0000000000000000000000000000000000000abc,0x12' }, 'invalid configuration: SVC_ERC6492_FACTORIES entry 2 is not a 0x-prefixed 20-byte hex address'],
      [{ SVC_RPC_URL_BASE_SEPOLIA: 'ws://node:8546' }, 'invalid configuration: SVC_RPC_URL_BASE_SEPOLIA must be an http(s) URL'],
    ];
    for (const [env, message] of cases) {
      const m = failure(env);
      expect(m).toBe(message);
      expect(m).not.toContain('\n');
      expect(m).not.toContain('11'.repeat(8));
    }
  });
});
