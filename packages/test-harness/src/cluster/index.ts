export { startRedisCluster, type RedisClusterOptions } from './start-cluster.js';
export type { RedisCluster } from './redis-cluster.js';
export type { ClusterNodeAddress } from './address.js';
export { redisCliBinary } from './create-cluster.js';
