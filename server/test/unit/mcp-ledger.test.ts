import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildPackages, ROOT } from '../helpers/build.js';
import { runCommand } from '../helpers/spawn.js';
import { ConfigError, formatBaseUnits, LedgerError, loadBuyerConfig, makeRedactor, SpendingLedger, toBaseUnits } from '@svc/mcp';

/** The buyer wallet's pure parts: amounts, configuration, redaction and the spending ledger (svc-mcp, mcp/src). */
const dir = mkdtempSync(join(tmpdir(), 'svc-mcp-ledger-'));
let n = 0;
const file = () => join(dir, `spending-${++n}.json`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const KEY = `0x${'ab'.repeat(32)}`;

describe('amounts', () => {
  it('GIVEN decimal strings THEN base units are exact integers and format back with two decimals at least', () => {
    expect(toBaseUnits('4.50')).toBe(4_500_000n);
    expect(toBaseUnits('0.000001')).toBe(1n);
    expect(toBaseUnits('10')).toBe(10_000_000n);
    expect(toBaseUnits('123456789012345.123456')).toBe(123456789012345123456n);
    for (const bad of ['', '-1', '1e3', '0.0000001', '1.', '.5', 'NaN', '1,00', '0x10']) expect(toBaseUnits(bad), bad).toBeNull();
    expect(formatBaseUnits(4_500_000n)).toBe('4.50');
    expect(formatBaseUnits(1n)).toBe('0.000001');
    expect(formatBaseUnits(0n)).toBe('0.00');
    expect(formatBaseUnits(-500_000n)).toBe('-0.50');
  });
});

describe('configuration', () => {
  it('GIVEN the environment THEN defaults are test chains only, 10.00 per payment and 50.00 per day; a bad value names its variable and never the key', () => {
    const c = loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY.slice(2).toUpperCase(), HOME: dir });
    expect(c).toMatchObject({ privateKey: KEY, maxPerPayment: 10_000_000n, maxPerDay: 50_000_000n, allowedChains: ['base-sepolia'], allowedMerchants: null });
    expect(loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_MERCHANTS: ' Shop-A , mrch_X ', SVC_MCP_SERVICE_URL: 'https://Checkout.example.com' })).toMatchObject({
      allowedMerchants: ['shop-a', 'mrch_x'],
      serviceHosts: ['checkout.example.com'],
    });
    // domains alone need no service; ids and slugs are only trusted from a named deployment
    expect(loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_MERCHANTS: 'shop.example.com' }).allowedMerchants).toEqual(['shop.example.com']);
    expect(() => loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_MERCHANTS: 'mrch_x' })).toThrow(/SVC_MCP_SERVICE_URL/);
    expect(() => loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_SERVICE_URL: 'ftp://x' })).toThrow(/SVC_MCP_SERVICE_URL/);
    expect(loadBuyerConfig({ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_MERCHANTS: '*' }).allowedMerchants).toBeNull();
    const bad: Array<[Record<string, string>, string]> = [
      [{}, 'SVC_WALLET_PRIVATE_KEY is required'],
      [{ SVC_WALLET_PRIVATE_KEY: `${KEY}00` }, 'SVC_WALLET_PRIVATE_KEY must be 32 bytes'],
      [{ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_MAX_PER_PAYMENT: '5.1234567' }, 'SVC_MCP_MAX_PER_PAYMENT'],
      [{ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_CHAINS: 'base,polygon' }, 'SVC_MCP_ALLOWED_CHAINS'],
      [{ SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_AGENT_ID: 'agent-7' }, 'SVC_MCP_AGENT_ID'],
    ];
    for (const [env, message] of bad) {
      let err: unknown;
      try {
        loadBuyerConfig(env);
      } catch (e) {
        err = e;
      }
      expect(err, message).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain(message);
      expect((err as Error).message).not.toContain('abab');
    }
  });

  it('GIVEN any text THEN the redactor removes the key body in any case, with or without 0x', () => {
    const redact = makeRedactor(KEY);
    expect(redact(`a ${KEY} b ${KEY.slice(2).toUpperCase()} c`)).toBe('a 0x[REDACTED] b [REDACTED] c');
    expect(redact('nothing secret')).toBe('nothing secret');
  });
});

describe('spending ledger', () => {
  const entry = (session: string, amount: bigint) => ({ amount, merchant_id: 'mrch_a', session_id: session });

  it('GIVEN reservations THEN the day limit holds across instances on one file, signed-and-refused counts until validBefore, and a new UTC day starts at zero', async () => {
    let now = new Date('2026-03-01T23:50:00Z');
    const f = file();
    const a = new SpendingLedger(f, () => now);
    const b = new SpendingLedger(f, () => now); // another process on the same file
    expect(await a.reserve('mrch_a/s1', entry('s1', 6_000_000n), 10_000_000n)).toEqual({ ok: true });
    // concurrent reservations from two instances: only one fits the 4.00 left
    const [r2, r3] = await Promise.all([a.reserve('mrch_a/s2', entry('s2', 3_000_000n), 10_000_000n), b.reserve('mrch_a/s3', entry('s3', 3_000_000n), 10_000_000n)]);
    expect([r2.ok, r3.ok].sort()).toEqual([false, true]);
    const refused = (r2.ok ? r3 : r2) as { ok: false; totals: { used: bigint } };
    expect(refused.totals.used).toBe(9_000_000n);

    await a.settle('mrch_a/s1', 'spent');
    const second = r2.ok ? 'mrch_a/s2' : 'mrch_a/s3';
    const validBefore = Math.floor(now.getTime() / 1000) + 300;
    await a.signed(second, validBefore);
    await a.settle(second, 'void');
    expect(await b.totals()).toMatchObject({ day: '2026-03-01', spent: 6_000_000n, pending: 3_000_000n });
    now = new Date((validBefore - 1) * 1000);
    expect(await b.totals()).toMatchObject({ pending: 3_000_000n });
    now = new Date((validBefore + 1) * 1000); // the refused authorization expired: it can no longer move money
    expect(await b.totals()).toMatchObject({ day: '2026-03-01', spent: 6_000_000n, pending: 0n });
    now = new Date('2026-03-02T00:00:01Z');
    expect(await b.totals()).toMatchObject({ day: '2026-03-02', spent: 0n, pending: 0n, used: 0n });
    expect(await b.reserve('mrch_a/s4', entry('s4', 10_000_000n), 10_000_000n)).toEqual({ ok: true });
    await a.release(second);
    expect(JSON.parse(readFileSync(f, 'utf8')).entries[second]).toBeUndefined();
  });

  it('GIVEN an unreadable spending file THEN every operation fails closed with LedgerError, and the file is left as it was', async () => {
    const f = file();
    writeFileSync(f, '{"version":1,"entries":');
    const l = new SpendingLedger(f);
    await expect(l.reserve('k', entry('s', 1n), 10n)).rejects.toBeInstanceOf(LedgerError);
    await expect(l.totals()).rejects.toThrow('is not valid JSON');
    writeFileSync(f, JSON.stringify({ version: 1, entries: { k: { day: 'yesterday', amount: '1' } } }));
    await expect(l.totals()).rejects.toThrow('unreadable entry');
    writeFileSync(f, JSON.stringify({ entries: {} }));
    await expect(l.totals()).rejects.toThrow('version 1');
    expect(readFileSync(f, 'utf8')).toBe(JSON.stringify({ entries: {} }));
  });

  it('GIVEN three processes reserving on one file at once THEN the lock serializes them: exactly the limit is reserved and every reservation is in the file', async () => {
    await buildPackages(['mcp']);
    const f = file();
    // each process tries 15 reservations of 1 unit against a limit of 20 units
    const script = `
      const { SpendingLedger } = await import(${JSON.stringify(join(ROOT, 'mcp/dist/index.js'))});
      const l = new SpendingLedger(process.env.FILE);
      let ok = 0;
      for (let i = 0; i < 15; i++) if ((await l.reserve(process.env.TAG + '/' + i, { amount: 1n, merchant_id: 'm', session_id: String(i) }, 20n)).ok) ok++;
      console.log(ok);`;
    const runs = await Promise.all(['p1', 'p2', 'p3'].map((tag) => runCommand(process.execPath, ['--input-type=module', '-e', script], { env: { FILE: f, TAG: tag, NODE_OPTIONS: '' }, timeoutMs: 120_000 })));
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const granted = runs.reduce((sum, r) => sum + Number(r.stdout.trim()), 0);
    expect(granted).toBe(20);
    expect(Object.keys(JSON.parse(readFileSync(f, 'utf8')).entries)).toHaveLength(20);
  });
});
