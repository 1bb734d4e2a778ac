import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  // The workspace packages resolve to their TypeScript sources (tsconfig.base.json `paths`),
  // as they do for tsc and tsx: tests need no build. Their built `dist/` is what the
  // published tarballs carry (tested in server/test/packages.test.ts).
  resolve: { tsconfigPaths: true },
  test: {
    include: ['server/test/**/*.test.ts', 'sdk/test/**/*.test.ts', 'contract/test/**/*.test.ts'],
    // `*.pg.test.ts` need a real PostgreSQL server (they stall or share its connections): they
    // run when DATABASE_URL is set (CI's first pass) and are not collected on embedded PGlite.
    exclude: process.env.DATABASE_URL ? configDefaults.exclude : [...configDefaults.exclude, '**/*.pg.test.ts'],
    globalSetup: ['server/test/global-setup.ts'],
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    // Room for a busy machine (a 2-core box at load 10-18 runs a test 3-4 times slower than an
    // idle one): a timeout here only turns a hang into a failure, it never measures speed.
    testTimeout: 180_000,
    hookTimeout: 300_000,
    reporters: ['default'],
  },
});
