import { expect } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

/** The one-line message loadConfig refuses `env` with; fails the test when it accepts it. */
export function configFailure(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}
