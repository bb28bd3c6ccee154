import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { acquireRedis } from './redis.js';
import { deletePrefix, randomPrefix } from './prefix.js';
import { startRedisServer } from './redis-server.js';

describe('local redis-server', () => {
  it('starts on a free 127.0.0.1 port without persistence, halts, resumes and is removed', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    expect(server.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    const redis = new Redis(server.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      enableOfflineQueue: false,
    });
    redis.on('error', () => {});
    onTestFinished(() => redis.disconnect());
    await new Promise((resolve) => redis.once('ready', resolve));
    expect(await redis.config('GET', 'save')).toEqual(['save', '']);
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    expect(await redis.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);

    await server.halt();
    expect(server.pid()).toBeUndefined();
    await expect(redis.ping()).rejects.toThrow();

    await server.resume();
    await new Promise((resolve) => (redis.status === 'ready' ? resolve(undefined) : redis.once('ready', resolve)));
    expect(await redis.ping()).toBe('PONG');

    await server.stop();
    expect(existsSync(server.dir)).toBe(false);
  });

  it('says what to install when the binary is missing', async () => {
    const saved = process.env['REDIS_SERVER_BIN'];
    process.env['REDIS_SERVER_BIN'] = '/nonexistent/redis-server';
    onTestFinished(() => {
      if (saved === undefined) delete process.env['REDIS_SERVER_BIN'];
      else process.env['REDIS_SERVER_BIN'] = saved;
    });
    await expect(startRedisServer()).rejects.toThrow(/apt-get install redis-server.*REDIS_URL/);
  });
});

describe('acquireRedis', () => {
  it('gives a working Redis, and deletePrefix removes only its own prefix', async () => {
    const redis = await acquireRedis();
    onTestFinished(() => redis.stop());
    const client = new Redis(redis.url);
    onTestFinished(() => client.disconnect());
    const mine = randomPrefix();
    const other = randomPrefix();
    await client.set(`${mine}:a`, '1');
    await client.set(`${mine}:{u:x}:b`, '1');
    await client.set(`${other}:a`, '1');
    expect(await deletePrefix(client, mine)).toBe(2);
    expect(await client.exists(`${other}:a`)).toBe(1);
    await client.del(`${other}:a`);
  });
});
