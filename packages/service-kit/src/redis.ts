import { once } from 'node:events';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { CommonConfig } from './config.js';
import { BUDGET } from './time.js';

/**
 * Longest time a request-path command may take, ms ({@link BUDGET}.commandMs): ioredis's
 * `commandTimeout` on standalone, and the coordinator's own bound (`timeoutMs`) for both, so a Cluster
 * failover also answers 503 within 2 s.
 */
export const REQUEST_TIMEOUT_MS = BUDGET.commandMs;

/** What a connection is for. */
export type ConnectionRole =
  /** Request paths: no offline queue and a bounded command time, so an outage answers fast. */
  | 'requests'
  /** BullMQ workers and other blocking readers: retry forever, as BullMQ requires. */
  | 'blocking';

/** The part of a logger the connection needs (a pino or Fastify logger fits). */
export interface ConnectionLogger {
  warn(obj: object, msg: string): void;
  info(msg: string): void;
}

/** Options of {@link createRedis}. */
export interface CreateRedisOptions {
  /**
   * Longest time a command may take before it fails, ms (requests role only).
   * @defaultValue {@link REQUEST_TIMEOUT_MS}
   */
  commandTimeoutMs?: number;
  /** Where connection errors are logged (once per outage, not per retry). */
  logger?: ConnectionLogger;
  /** Connection name shown by `CLIENT LIST`. */
  name?: string;
  /**
   * Connect only when `connect()` is called (an owner whose constructor builds and whose `start()` acts).
   * @defaultValue false
   */
  lazyConnect?: boolean;
}

function roleOptions(role: ConnectionRole, options: CreateRedisOptions): RedisOptions {
  const common: RedisOptions = {
    connectTimeout: BUDGET.connectMs,
    // Reconnect forever, quickly: the service recovers by itself when Redis is back.
    retryStrategy: (times) => Math.min(50 * times, 250),
    ...(options.name === undefined ? {} : { connectionName: options.name }),
    ...(options.lazyConnect === true ? { lazyConnect: true } : {}),
    // No CLIENT SETINFO: Redis 7.0 has no such command, so the ACL the docs give cannot name it, and on
    // 7.2 and later each connection would be refused it (ioredis goes on, but Redis's ACL log fills).
    disableClientInfo: true,
  };
  if (role === 'blocking') return { ...common, maxRetriesPerRequest: null, enableOfflineQueue: true };
  return {
    ...common,
    // No auto-pipelining: ioredis runs one auto-pipeline per connection at a time, so during a hang
    // a second batch would wait for the first to time out, and an answer could take twice
    // commandTimeout, past the 2 s the API promises.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: options.commandTimeoutMs ?? REQUEST_TIMEOUT_MS,
  };
}

/**
 * A Redis client for `config`: a Cluster client when `REDIS_CLUSTER_NODES` is set, else a standalone
 * one for `REDIS_URL` (`rediss://` for TLS; user and password in the URL).
 */
export function createRedis(
  config: CommonConfig,
  role: ConnectionRole,
  options: CreateRedisOptions = {},
): Redis | Cluster {
  const redisOptions = roleOptions(role, options);
  let client: Redis | Cluster;
  if (config.redisClusterNodes !== undefined) {
    const url = new URL(config.redisUrl);
    const clusterOptions: ClusterOptions = {
      redisOptions: {
        ...redisOptions,
        ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
        ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
        ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
      },
      enableOfflineQueue: redisOptions.enableOfflineQueue ?? true,
      clusterRetryStrategy: (times) => Math.min(100 * times, 1000),
      slotsRefreshTimeout: 2000,
      // ioredis learns of a failover only from a MOVED answer unless it asks; ask every second, and
      // at once whenever a node fails (below), so commands stop going to a dead master soon after
      // its replica takes over.
      slotsRefreshInterval: 1000,
      ...(options.lazyConnect === true ? { lazyConnect: true } : {}),
    };
    const cluster = new Cluster(config.redisClusterNodes, clusterOptions);
    cluster.on('node error', () => cluster.refreshSlotsCache());
    client = cluster;
  } else {
    client = new Redis(config.redisUrl, redisOptions);
  }
  let down = false;
  client.on('error', (err: Error) => {
    if (!down) options.logger?.warn({ err }, 'redis connection error');
    down = true;
  });
  client.on('ready', () => {
    if (down) options.logger?.info('redis connection restored');
    down = false;
  });
  return client;
}

/** Resolves when `client` is ready, or rejects after `timeoutMs` ({@link BUDGET}.connectMs by default). */
export async function waitUntilReady(client: Redis | Cluster, timeoutMs: number = BUDGET.connectMs): Promise<void> {
  if (client.status === 'ready') return;
  try {
    await once(client, 'ready', { signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    throw new Error(`Redis was not ready within ${timeoutMs} ms`);
  }
}
