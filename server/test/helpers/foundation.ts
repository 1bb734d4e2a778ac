import { expect } from 'vitest';
import { expectErrorShape, type ApiResponse, type TestApp } from './harness.js';

/** Raw SQL against the app's own database (`?` placeholders), outside any request. */
export async function sql<T = Record<string, any>>(app: TestApp, query: string, params: unknown[] = []): Promise<T[]> {
  return app.services.orm.em.fork().execute(query, params) as Promise<T[]>;
}

/** merchants.config_version, the manifest cache key every config write bumps. */
export async function configVersion(app: TestApp, merchantId: string): Promise<number> {
  const rows = await sql<{ config_version: number }>(app, 'select config_version from merchants where id = ?', [merchantId]);
  expect(rows).toHaveLength(1);
  return Number(rows[0]!.config_version);
}

/** Stack frames, file paths or exception names that must never reach a client. */
const LEAK = /(\bat\s+\S+\s+\(|\.ts:\d+|\.js:\d+|node_modules|Error:\s|stack)/;

/** THEN-helper: the status, exactly the two error keys, the primary code, and no stack trace. */
export function expectError(res: ApiResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expectErrorShape(res.body);
  expect(res.body.reason_codes[0], res.text).toBe(code);
  expect(res.body.error_human.length).toBeGreaterThan(0);
  expect(res.body.error_human).not.toContain('\n');
  expect(res.text).not.toMatch(LEAK);
}
