import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configFailure as failure } from '../helpers/config.js';
import { relayerKeysOf } from '../../src/rails/index.js';
import { MAIN, runScript } from '../helpers/spawn.js';

const PG = 'postgresql://u@127.0.0.1:1/db';
const KEYS = ['0x' + '11'.repeat(32), '0x' + '22'.repeat(32), '0x' + '33'.repeat(32)] as `0x${string}`[];

describe('SVC_WEB_CONCURRENCY (the process model)', () => {
  it('GIVEN nothing THEN one server process; GIVEN N on PostgreSQL THEN N', () => {
    expect(loadConfig({}).SVC_WEB_CONCURRENCY).toBe(1);
    expect(loadConfig({ SVC_WEB_CONCURRENCY: '4', DATABASE_URL: PG }).SVC_WEB_CONCURRENCY).toBe(4);
    expect(failure({ SVC_WEB_CONCURRENCY: '0', DATABASE_URL: PG })).toMatch(/^invalid configuration: SVC_WEB_CONCURRENCY /);
  });

  it('GIVEN N > 1 on the embedded PGlite database THEN refused in one line naming the variable', () => {
    expect(failure({ SVC_WEB_CONCURRENCY: '2' })).toBe(
      'invalid configuration: SVC_WEB_CONCURRENCY must be 1 on the embedded PGlite database (it is single-process); set DATABASE_URL to a PostgreSQL database to run 2 server processes',
    );
    expect(loadConfig({ SVC_WEB_CONCURRENCY: '1' }).SVC_WEB_CONCURRENCY).toBe(1);
  });

  it('GIVEN npm start with SVC_WEB_CONCURRENCY=2 and no DATABASE_URL THEN it exits 1 with that one line, before opening anything', async () => {
    const run = await runScript(MAIN, [], { SVC_WEB_CONCURRENCY: '2', DATABASE_URL: undefined, SVC_DATA_DIR: '/nonexistent/never-created', PORT: '0' });
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^invalid configuration: SVC_WEB_CONCURRENCY must be 1 on the embedded PGlite database/)]);
  });

  it('GIVEN the onchain facilitator in a cluster THEN each process needs its own relayer key, and each gets a disjoint share', () => {
    const onchain = { SVC_LIVE_FACILITATOR: 'onchain', SVC_RPC_URL_BASE: 'https://rpc.example.com', DATABASE_URL: PG };
    expect(failure({ ...onchain, SVC_WEB_CONCURRENCY: '4', SVC_RELAYER_PRIVATE_KEYS: KEYS.join(',') })).toMatch(
      /^invalid configuration: SVC_RELAYER_PRIVATE_KEYS has 3 key\(s\) for SVC_WEB_CONCURRENCY=4/,
    );
    expect(loadConfig({ ...onchain, SVC_WEB_CONCURRENCY: '3', SVC_RELAYER_PRIVATE_KEYS: KEYS.join(',') }).SVC_RELAYER_PRIVATE_KEYS).toHaveLength(3);
    expect(relayerKeysOf(KEYS)).toEqual(KEYS);
    expect(relayerKeysOf(KEYS, { slot: 0, of: 2 })).toEqual([KEYS[0], KEYS[2]]);
    expect(relayerKeysOf(KEYS, { slot: 1, of: 2 })).toEqual([KEYS[1]]);
    const shares = [0, 1, 2].map((slot) => relayerKeysOf(KEYS, { slot, of: 3 }));
    expect(shares.flat().sort()).toEqual([...KEYS].sort());
  });
});
