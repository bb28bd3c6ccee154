export { acquireRedis, type TestRedis } from './redis.js';
export {
  startRedisServer,
  freePort,
  redisServerBinary,
  type RedisServer,
  type RedisServerOptions,
} from './redis-server.js';
export {
  startRedisCluster,
  redisCliBinary,
  type RedisCluster,
  type RedisClusterOptions,
  type ClusterNodeAddress,
} from './cluster/index.js';
export { randomPrefix, deletePrefix, isolatedRedis } from './prefix.js';
export type { HarnessProvided } from './provided.js';
export { watchClient, watchServer, parseMonitorLine, type CommandWatch, type Seen } from './monitor.js';
export { until } from './until.js';
export { cleanUp } from './clean-up.js';
export { commandsDuring, midSweepInterval, topCalls, totalCalls, windowOf } from './commandstats.js';
