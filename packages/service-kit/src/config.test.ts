import { describe, expect, it } from 'vitest';
import { commonConfig, commonEnvShape, parseEnv } from './config.js';

describe('common configuration', () => {
  it('uses the contract defaults when nothing is set', () => {
    expect(commonConfig(parseEnv(commonEnvShape, {}))).toEqual({
      redisUrl: 'redis://127.0.0.1:6379',
      redisClusterNodes: undefined,
      keyPrefix: 'cq',
      logLevel: 'info',
      redisWaitReplicas: 0,
      redisWaitTimeoutMs: 100,
      spawnQueueShards: 1,
      redisAcceptRisks: new Set(),
    });
  });

  it('reads cluster nodes, TLS URLs and levels', () => {
    const config = commonConfig(
      parseEnv(commonEnvShape, {
        REDIS_URL: 'rediss://u:p@h:6380',
        REDIS_CLUSTER_NODES: '10.0.0.1:7000, [::1]:7001',
        LOG_LEVEL: 'debug',
      }),
    );
    expect(config.redisClusterNodes).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: '::1', port: 7001 },
    ]);
    expect(config.redisUrl).toBe('rediss://u:p@h:6380');
  });

  it('reads the Redis risks to accept, and none when unset', () => {
    expect(
      commonConfig(parseEnv(commonEnvShape, { REDIS_ACCEPT_RISKS: ' no-persistence, eviction ' })).redisAcceptRisks,
    ).toEqual(new Set(['no-persistence', 'eviction']));
    expect(commonConfig(parseEnv(commonEnvShape, { REDIS_ACCEPT_RISKS: '' })).redisAcceptRisks.size).toBe(0);
  });

  it.each([
    [{ REDIS_URL: 'http://x' }, /^REDIS_URL must start with redis:\/\/ or rediss:\/\//],
    [{ REDIS_URL: 'not a url' }, /^REDIS_URL must be a URL/],
    [{ KEY_PREFIX: 'a{b}' }, /^KEY_PREFIX must be 1 to 64 characters/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of fatal, error/],
    [{ REDIS_WAIT_REPLICAS: '-1' }, /^REDIS_WAIT_REPLICAS must be an integer from 0 to 16 \(got "-1"\)$/],
    [{ REDIS_CLUSTER_NODES: 'host' }, /^REDIS_CLUSTER_NODES must be host:port,host:port,... \(got "host"\)$/],
    [
      { REDIS_ACCEPT_RISKS: 'eviction,everything' },
      /^REDIS_ACCEPT_RISKS must be a comma-separated list of eviction, no-persistence, aof-acl-replay, acl-commands \(got "everything"\)$/,
    ],
  ])('refuses %o with one line naming the variable', (env, message) => {
    expect(() => parseEnv(commonEnvShape, env)).toThrow(message);
  });
});
