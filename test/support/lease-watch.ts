import type { Cluster, Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a test sees of a lease key from outside, sampling it every 10 ms. */
export interface LeaseWatch {
  /**
   * The latest instant (epoch ms) the lease was seen to hold until: a lower bound of when Redis lets
   * it expire, taken as the time the PTTL was sent plus the PTTL answered.
   */
  readonly expiresAt: number;
  /** True once the key is gone (expired, released or taken over). */
  readonly gone: boolean;
  stop(): void;
}

/** Samples `key`'s PTTL on the test's own connection until the key is gone or `stop()` is called. */
export function watchLease(redis: Redis | Cluster, key: string): LeaseWatch {
  let expiresAt = 0;
  let gone = false;
  let stopped = false;
  void (async () => {
    while (!stopped && !gone) {
      const sent = Date.now();
      const pttl = await redis.pttl(key).catch(() => undefined);
      if (pttl !== undefined && pttl > 0) expiresAt = Math.max(expiresAt, sent + pttl);
      if (pttl === -2) gone = true;
      await sleep(10);
    }
  })();
  return {
    get expiresAt() {
      return expiresAt;
    },
    get gone() {
      return gone;
    },
    stop() {
      stopped = true;
    },
  };
}
