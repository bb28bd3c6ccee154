export {
  ConfigError,
  commonConfig,
  commonEnvShape,
  intVar,
  logLevels,
  nodeListVar,
  parseEnv,
  redisUrlVar,
  stringVar,
  type CommonConfig,
} from './config.js';
export { REQUEST_TIMEOUT_MS, createRedis, waitUntilReady, type ConnectionLogger, type ConnectionRole, type CreateRedisOptions } from './redis.js';
export { createLogger, redactedPaths } from './logger.js';
export {
  SPAWN_JOB,
  SPAWN_QUEUE,
  spawnJobId,
  spawnJobOptions,
  spawnJobSchema,
  spawnQueueShards,
  type SpawnJob,
  type SpawnQueueShard,
} from './spawn-queue.js';
export { replicaWaitOf } from './replica-wait.js';
export { runUntilSignal } from './shutdown.js';
export { loadConfigOrExit } from './startup.js';
