/**
 * The console's browser tests (npm run test:browser; .ci/run runs them once,
 * on Postgres). Kept out of `npm test` so that suite never needs Chromium.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/console/**/*.e2e.ts'],
    globalSetup: ['test/support/global-setup.ts', 'test/console/build-console.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // One Chromium at a time: the machine running CI is small.
    fileParallelism: false,
    reporters: ['default'],
  },
});
