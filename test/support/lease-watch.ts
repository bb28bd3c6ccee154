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

/**
 * What a test sees of the worker hosts' leases (`Keys.hostLeases()`, a sorted set of lease token by when
 * it runs out on Redis's clock), sampling it every 10 ms: the latest instant (epoch ms, the test's clock)
 * any of them was seen to hold until, Redis's clock translated by the sample's own `TIME`.
 */
export function watchHostLeases(redis: Redis | Cluster, key: string): Omit<LeaseWatch, 'gone'> {
  let expiresAt = 0;
  let stopped = false;
  const read = `local t = redis.call('TIME')
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
return { t[1] * 1000 + math.floor(t[2] / 1000), last[2] or '0' }`;
  void (async () => {
    while (!stopped) {
      const sent = Date.now();
      const reply = (await redis.eval(read, 1, key).catch(() => undefined)) as [number, string] | undefined;
      if (reply !== undefined && Number(reply[1]) > 0)
        expiresAt = Math.max(expiresAt, sent + Number(reply[1]) - reply[0]);
      await sleep(10);
    }
  })();
  return {
    get expiresAt() {
      return expiresAt;
    },
    stop() {
      stopped = true;
    },
  };
}
