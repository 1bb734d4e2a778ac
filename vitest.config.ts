import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['server/test/**/*.test.ts', 'sdk/test/**/*.test.ts', 'contract/test/**/*.test.ts'],
    // `*.pg.test.ts` need a real PostgreSQL server (they stall or share its connections): they
    // run when DATABASE_URL is set (CI's first pass) and are not collected on embedded PGlite.
    exclude: process.env.DATABASE_URL ? configDefaults.exclude : [...configDefaults.exclude, '**/*.pg.test.ts'],
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
