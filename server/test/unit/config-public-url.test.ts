import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configFailure as failure } from '../helpers/config.js';
import { MAIN, runScript } from '../helpers/spawn.js';

const KEY = '11'.repeat(32);
const REQUIRED =
  "invalid configuration: SVC_PUBLIC_BASE_URL is required when NODE_ENV=production: the public origin of sign-in links and every other URL the service hands out, such as https://checkout.example.com (never taken from the request's Host header)";

describe('SVC_PUBLIC_BASE_URL (issue 24.1)', () => {
  it('GIVEN NODE_ENV=production without it THEN refused in one line naming it; with it, the origin is kept', () => {
    expect(failure({ NODE_ENV: 'production', SVC_MASTER_KEY: KEY })).toBe(REQUIRED);
    expect(failure({ NODE_ENV: 'production', SVC_MASTER_KEY: KEY, SVC_PUBLIC_BASE_URL: '' })).toBe(REQUIRED);
    expect(loadConfig({ NODE_ENV: 'production', SVC_MASTER_KEY: KEY, SVC_PUBLIC_BASE_URL: 'https://checkout.example.com/' }).SVC_PUBLIC_BASE_URL).toBe('https://checkout.example.com');
  });

  it('GIVEN development or test without it THEN the default comes from configuration: http://localhost:<PORT>', () => {
    expect(loadConfig({}).SVC_PUBLIC_BASE_URL).toBe('http://localhost:3000');
    expect(loadConfig({ NODE_ENV: 'test', PORT: '8080' }).SVC_PUBLIC_BASE_URL).toBe('http://localhost:8080');
    expect(loadConfig({ SVC_PUBLIC_BASE_URL: 'HTTP://Checkout.Example.com:8443' }).SVC_PUBLIC_BASE_URL).toBe('http://checkout.example.com:8443');
  });

  it('GIVEN a value that is not an http(s) origin THEN refused in one line naming it', () => {
    const message =
      'invalid configuration: SVC_PUBLIC_BASE_URL must be an http(s) origin such as https://checkout.example.com (scheme, host and optional port; no path, query or credentials)';
    for (const bad of ['checkout.example.com', 'ftp://checkout.example.com', 'https://checkout.example.com/svc', 'https://checkout.example.com/?a=1', 'https://checkout.example.com/#x', 'https://u:p@checkout.example.com']) {
      expect(failure({ SVC_PUBLIC_BASE_URL: bad }), bad).toBe(message);
    }
  });

  it('GIVEN npm start with NODE_ENV=production and no SVC_PUBLIC_BASE_URL THEN it exits 1 with that one line, before opening anything', async () => {
    const run = await runScript(MAIN, [], { NODE_ENV: 'production', SVC_MASTER_KEY: KEY, SVC_PUBLIC_BASE_URL: undefined, DATABASE_URL: undefined, SVC_DATA_DIR: '/nonexistent/never-created', PORT: '0' });
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([REQUIRED]);
  }, 60_000);
});
