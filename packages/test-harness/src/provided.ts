import type {} from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis shared by every test file of the run (see the global setup). */
    redisUrl: string;
    /**
     * Seed nodes (`127.0.0.1:p1,127.0.0.1:p2,...`) of the Redis Cluster shared by every test file of the
     * run; provided only by the cluster global setup (`@cq/test-harness/cluster-global-setup`).
     */
    redisClusterNodes: string;
  }
}

/** The values the harness's global setup provides to tests through `inject()`. */
export interface HarnessProvided {
  redisUrl: string;
  redisClusterNodes: string;
}
