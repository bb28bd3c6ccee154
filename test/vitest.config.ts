import { defineConfig } from 'vitest/config';

/** The end-to-end tests of the API and the worker hosts, run a second time on Redis Cluster. */
const onBothTargets = [
  'e2e/api-process.test.ts',
  'e2e/sessions.test.ts',
  'e2e/host-crash.test.ts',
  'e2e/chaos.test.ts',
  'e2e/capacity.test.ts',
  'e2e/events.test.ts',
  'e2e/output.test.ts',
  'e2e/idle.test.ts',
  'e2e/sweep-turns.test.ts',
  'e2e/session-list.test.ts',
  'e2e/pools.test.ts',
  'e2e/client.test.ts',
  'e2e/host-channel.test.ts',
  'e2e/isolation.test.ts',
  'e2e/proxy.test.ts',
];

/**
 * Standalone files run beside the cluster project, after it (`standalone-2`, on a redis-server of its
 * own), so that the two processes of `npm test` take about as long as each other.
 */
const besideCluster = [
  'browser/**/*.test.ts',
  'soak/**/*.test.ts',
  'e2e/webhooks.test.ts',
  'e2e/webhooks-scale.test.ts',
  // Moved beside the cluster when isolation's tests came (the standalone process was 866 s, the other 621 s).
  'e2e/quickstart.test.ts',
  'e2e/outage-tolerance.test.ts',
  // Work inside a session's faults, beside the cluster when they came (standalone 683 s, the other 713 s).
  'e2e/exec-faults.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // These tests start real processes and measure real time: one file at a time per project (and per
    // Redis); `npm test` runs `standalone` beside `cluster` then `standalone-2` (run-projects.mjs).
    fileParallelism: false,
    // run-projects.mjs names a report per project (the two run at once); a plain `vitest run` writes one.
    reporters: ['default', ['json', { outputFile: process.env['CQ_TEST_REPORT'] ?? 'test-results/vitest.json' }]],
    projects: [
      {
        extends: true,
        test: {
          name: 'standalone',
          include: ['e2e/**/*.test.ts'],
          exclude: [...besideCluster, '**/node_modules/**'],
          globalSetup: ['@cq/test-harness/global-setup'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'standalone-2',
          include: besideCluster,
          globalSetup: ['@cq/test-harness/global-setup'],
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          name: 'cluster',
          // A 3-master, 3-replica cluster of local redis-server processes; the failover test starts its own.
          include: [...onBothTargets, 'cluster/**/*.test.ts'],
          globalSetup: ['@cq/test-harness/cluster-global-setup'],
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
