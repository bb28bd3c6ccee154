import type { ReplicaWait, ScriptName } from '@cq/coordinator';
import type { CommonConfig } from './config.js';
import type { ConnectionLogger } from './redis.js';

/** How often at most a shortfall is logged, ms (every one is still counted). */
const LOG_EVERY_MS = 10_000;

/**
 * The coordinator's `WAIT` setting from `REDIS_WAIT_REPLICAS` / `REDIS_WAIT_TIMEOUT_MS`, or undefined
 * when it is 0. A write that fewer replicas acknowledged in time still stands; it is counted through
 * `onShortfall` and logged at most once per 10 s, since while a replica is down every write falls short.
 */
export function replicaWaitOf(
  config: CommonConfig,
  logger: ConnectionLogger,
  onShortfall?: (script: ScriptName, acknowledged: number) => void,
): ReplicaWait | undefined {
  if (config.redisWaitReplicas === 0) return undefined;
  let loggedAt = -Infinity;
  let since = 0;
  return {
    replicas: config.redisWaitReplicas,
    timeoutMs: config.redisWaitTimeoutMs,
    onShortfall: (script, acknowledged) => {
      onShortfall?.(script, acknowledged);
      since++;
      const now = performance.now();
      if (now - loggedAt < LOG_EVERY_MS) return;
      logger.warn(
        {
          script,
          acknowledged,
          wanted: config.redisWaitReplicas,
          timeoutMs: config.redisWaitTimeoutMs,
          shortfalls: since,
        },
        'writes not acknowledged by REDIS_WAIT_REPLICAS replicas in time; a failover now could lose them',
      );
      loggedAt = now;
      since = 0;
    },
  };
}
