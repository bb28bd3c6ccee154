import { aclRules } from '@cq/service-kit';
import { randomPrefix, startRedisServer, type RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startSystem, type System } from '../support/system.js';

describe('Redis with an ACL user', () => {
  it('API and worker hosts authenticate with the user and password in REDIS_URL; the default user is off', async () => {
    const server = await startRedisServer({
      args: ['--user', 'default', 'off', '--user', 'cq', 'on', '>s3cret-pass', '~*', '&*', '+@all'],
    });
    onTestFinished(() => server.stop());
    const url = server.url.replace('redis://', 'redis://cq:s3cret-pass@');
    const system = await startSystem({ redisUrl: url });
    const admitted = await system.client.spawn(
      (await system.client.issueToken({ userId: 'acl-user', metadata: { durationMs: 300 } })).token,
    );
    expect((await system.ended('acl-user', admitted.sessionId)).state).toBe('completed');
    expect(JSON.stringify([system.api.logs, ...system.workers.map((w) => w.logs)])).not.toContain('s3cret-pass');
  });
});

/** What a key holds, whatever its type, to compare before and after a restart. */
async function contentOf(redis: Redis, key: string): Promise<unknown> {
  const type = await redis.type(key);
  switch (type) {
    case 'string':
      return [type, await redis.get(key)];
    case 'hash':
      return [type, await redis.hgetall(key)];
    case 'zset':
      return [type, await redis.zrange(key, 0, -1, 'WITHSCORES')];
    case 'list':
      return [type, await redis.lrange(key, 0, -1)];
    case 'set':
      return [type, (await redis.smembers(key)).sort()];
    case 'stream':
      return [type, await redis.xrange(key, '-', '+')];
    default:
      return [type];
  }
}

/** Every key under `prefix:` that will still be there in `forMs` (no TTL, or a longer one), with what it holds. */
async function snapshot(redis: Redis, prefix: string, forMs: number): Promise<Map<string, unknown>> {
  const keys = new Map<string, unknown>();
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of batch) {
      const ttl = await redis.pttl(key);
      if (ttl === -1 || ttl > forMs) keys.set(key, await contentOf(redis, key));
    }
  } while (cursor !== '0');
  return keys;
}

/**
 * A system on `server` as user `cq` (password `cq-pass`) under `prefix`; a completed session of one
 * user and an unused token of another written through it; then the processes stopped, what they wrote
 * read, Redis restarted (SIGTERM: the AOF is flushed) and read again.
 */
async function writeRestartRead(
  server: RedisServer,
  prefix: string,
  accept: string,
): Promise<{
  before: Map<string, unknown>;
  after: Map<string, unknown>;
  system: System;
  sessionId: string;
  refusedToCq: unknown[];
}> {
  const env = { KEY_PREFIX: prefix, REDIS_ACCEPT_RISKS: accept };
  const system = await startSystem({
    redisUrl: server.url.replace('redis://', 'redis://cq:cq-pass@'),
    apiEnv: env,
    workerEnv: env,
  });
  const token = await system.client.issueToken({ userId: 'acl-a', metadata: { durationMs: 300 } });
  const { sessionId } = await system.client.spawn(token.token);
  expect((await system.ended('acl-a', sessionId)).state).toBe('completed');
  await system.client.issueToken({ userId: 'acl-b' });
  for (const started of [system.api, ...system.workers]) expect(await started.stop()).toBe(0);

  const observer = (): Redis => {
    const redis = new Redis(server.url.replace('redis://', 'redis://observer:observer-pass@'));
    onTestFinished(() => redis.disconnect());
    return redis;
  };
  const reader = observer();
  const before = await snapshot(reader, prefix, 60_000);
  // What the ACL refused to `cq` on the way, if anything (the log is lost with the restart).
  const refusedToCq = ((await reader.call('ACL', 'LOG')) as unknown[][]).filter((entry) => entry.includes('cq'));
  await server.halt('SIGTERM');
  await server.resume();
  const after = await snapshot(observer(), prefix, 0);
  return { before, after, system, sessionId, refusedToCq };
}

/** redis-server arguments: AOF, the users `default` (as `defaultRules` makes it), `cq` and an observer of the test's own. */
function aofWithUsers(prefix: string, defaultRules: string[]): string[] {
  return [
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--user',
    'default',
    ...defaultRules,
    '--user',
    'cq',
    'on',
    '>cq-pass',
    ...aclRules(prefix).split(' '),
    '--user',
    'observer',
    'on',
    '>observer-pass',
    '~*',
    '&*',
    '+@all',
  ];
}

describe('the recommended Redis setup (docs/redis-setup.md)', () => {
  it('with exactly the ACL the docs give: a token issued, a session spawned and ended; Redis restarted: every key written is still there, and the processes run on it again', async () => {
    const prefix = randomPrefix('acl');
    const server = await startRedisServer({ args: aofWithUsers(prefix, ['off', '~*', '&*', '+@all']) });
    onTestFinished(() => server.stop());
    const { before, after, sessionId, refusedToCq } = await writeRestartRead(server, prefix, '');
    expect(refusedToCq).toEqual([]);
    // The scripts wrote the session, its history, the user's fence, the unused token...
    expect(before.size).toBeGreaterThan(10);
    expect([...before.keys()].some((k) => k.includes(':token:'))).toBe(true);
    // Each as it was (keys about to expire were left out of `before`).
    expect(Object.fromEntries([...before.keys()].map((k) => [k, after.get(k)]))).toEqual(Object.fromEntries(before));

    // And the product reads them back, started again on the restarted Redis (no risk accepted).
    const again = await startSystem({
      redisUrl: server.url.replace('redis://', 'redis://cq:cq-pass@'),
      apiEnv: { KEY_PREFIX: prefix, REDIS_ACCEPT_RISKS: '' },
      workerEnv: { KEY_PREFIX: prefix, REDIS_ACCEPT_RISKS: '' },
    });
    expect((await again.client.history('acl-a')).map((h) => [h.sessionId, h.state])).toEqual([
      [sessionId, 'completed'],
    ]);
    expect((await fetch(`${again.api.baseUrl}/readyz`)).status).toBe(200);
  });

  it('where the config file resets the default user (`user default off`), Redis 7.0 loses the same writes at the restart: the processes refuse it unless told to accept it', async () => {
    const prefix = randomPrefix('acl');
    const server = await startRedisServer({ args: aofWithUsers(prefix, ['off']) });
    onTestFinished(() => server.stop());
    const { before, after, system } = await writeRestartRead(server, prefix, 'aof-acl-replay');
    expect(
      system.api.logs.some(
        (l) => l['level'] === 40 && /^accepted by REDIS_ACCEPT_RISKS=aof-acl-replay: /.test(String(l['msg'])),
      ),
    ).toBe(true);
    // Everything a script wrote is gone (the history, the token); what plain commands wrote is left.
    const lost = [...before.keys()].filter((k) => !after.has(k));
    expect(lost.length).toBeGreaterThan(5);
    expect(lost.some((k) => k.includes(':token:'))).toBe(true);
  });
});
