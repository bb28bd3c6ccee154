import { defineConfig, type ViteUserConfig } from 'vitest/config';

/**
 * The vitest configuration of a workspace whose tests need Redis: unit tests beside the code, one
 * real Redis for the run (global setup), a JSON report for CI's closing line.
 */
export function redisTestConfig(): ViteUserConfig {
  return defineConfig({
    test: {
      include: ['src/**/*.test.ts'],
      globalSetup: ['@cq/test-harness/global-setup'],
      testTimeout: 30_000,
      hookTimeout: 30_000,
      reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    },
  });
}
