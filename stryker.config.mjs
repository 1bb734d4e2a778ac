/**
 * Mutation testing of the pure code money depends on: the gate (verdict, mandates, receipts),
 * EIP-3009 checks and decimal money. `npm run mutate` (not part of `npm test` or CI: it runs
 * the unit tests once per mutant, about 20 minutes on 2 cores). Report: reports/mutation/.
 * The HTTP-tested settlement workflow is mutated by hand (docs/contributing.md, "Mutation testing").
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  mutate: ['server/src/modules/gate/*.ts', 'server/src/lib/eip3009.ts', 'server/src/lib/money.ts'],
  coverageAnalysis: 'perTest',
  concurrency: 1,
  timeoutMS: 60_000,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['dashboard', 'examples', 'openapi', 'reports', '.data', 'server/bench'],
  thresholds: { high: 90, low: 80, break: null },
};
