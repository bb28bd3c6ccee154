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
      // expect.poll waits for a condition as `until` does: 1 s (its default) is short on 2 busy cores.
      expect: { poll: { timeout: 10_000 } },
      reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    },
  });
}
