import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['e2e/**/*.test.ts', 'browser/**/*.test.ts', 'soak/**/*.test.ts'],
    globalSetup: ['@cq/test-harness/global-setup'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // These tests start real processes and measure real time: one file at a time on a 2-core machine.
    fileParallelism: false,
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
  },
});
