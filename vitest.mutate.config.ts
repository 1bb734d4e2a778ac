import { defineConfig } from 'vitest/config';

/**
 * The unit tests of the pure money and gate code, for the mutation run (`npm run mutate`,
 * stryker.config.mjs): no database, no global setup (the dashboard build and the PGlite
 * template are not needed), so each mutant costs a few seconds.
 */
export default defineConfig({
  resolve: { tsconfigPaths: true },
  test: {
    include: ['server/test/unit/{verdict,mandate,receipt,eip712,money,rails}.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
