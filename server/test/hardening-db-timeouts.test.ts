import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { pgTimeoutOptions } from '../src/db/orm.js';

describe('hardening: database timeouts are configuration (issue 9.5)', () => {
  it('GIVEN the timeout variables THEN they are validated, default to 5 s and become pg statement, query, connect and idle-transaction timeouts', () => {
    const base = { NODE_ENV: 'test' };
    const d = loadConfig(base);
    expect([d.SVC_DB_STATEMENT_TIMEOUT_MS, d.SVC_DB_CONNECT_TIMEOUT_MS]).toEqual([5000, 5000]);
    expect(() => loadConfig({ ...base, SVC_DB_STATEMENT_TIMEOUT_MS: '0' })).toThrow(/SVC_DB_STATEMENT_TIMEOUT_MS/);
    expect(() => loadConfig({ ...base, SVC_DB_CONNECT_TIMEOUT_MS: 'soon' })).toThrow(/SVC_DB_CONNECT_TIMEOUT_MS/);
    expect(pgTimeoutOptions({ statementMs: 1000, connectMs: 800 })).toEqual({
      connectionTimeoutMillis: 800,
      statement_timeout: 1000,
      query_timeout: 3000,
      idle_in_transaction_session_timeout: 30_000,
    });
  });
});
