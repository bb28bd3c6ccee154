import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Coordinator } from './coordinator.js';
import { createToken, parseToken } from './tokens.js';
import { connectionPool, coordinatorsOn, elapse, testCoordinator } from './test-support/setup.js';

describe('one-time tokens', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 1000 } });

  it('a token carries at least 128 random bits and its user as routing tag', () => {
    const a = createToken('alice');
    const b = createToken('alice');
    expect(a.token).not.toBe(b.token);
    const secret = a.token.split('.')[2]!;
    expect(Buffer.from(secret, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
    expect(parseToken(a.token)).toEqual(a.parsed);
    expect(a.parsed.userId).toBe('alice');
  });

  it('Redis stores only the SHA-256 digest of the secret, with the metadata and a TTL', async () => {
    const issued = await coordinator.tokens.issue('store-check', { metadata: { durationMs: 5 }, ttlMs: 60_000 });
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const secret = issued.token.split('.')[2]!;
    const keys = await coordinator.redis.keys(`${coordinator.keys.prefix}:{u:store-check}:*`);
    const tokenKeys = keys.filter((k) => k.includes(':token:'));
    expect(tokenKeys).toHaveLength(1);
    expect(tokenKeys[0]).toBe(coordinator.tokens.keyOf(parseToken(issued.token)!));
    for (const key of keys) {
      expect(key).not.toContain(secret);
      const type = await coordinator.redis.type(key);
      const dump =
        type === 'hash'
          ? JSON.stringify(await coordinator.redis.hgetall(key))
          : JSON.stringify(await coordinator.redis.zrange(key, 0, -1));
      expect(dump).not.toContain(secret);
    }
    const pttl = await coordinator.redis.pttl(tokenKeys[0]!);
    expect(pttl).toBeGreaterThan(59_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(issued.expiresAt - Date.now()).toBeGreaterThan(55_000);
  });

  it('a second consume of the same token is refused', async () => {
    const issued = await coordinator.tokens.issue('twice', { metadata: { a: 1 }, lifetimeMs: 1234 });
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const first = await coordinator.tokens.consume(issued.token);
    expect(first).toMatchObject({ consumed: true, userId: 'twice', metadata: { a: 1 }, lifetimeMs: 1234 });
    expect(await coordinator.tokens.consume(issued.token)).toEqual({ consumed: false });
  });

  it('unknown, expired and used tokens look the same to the caller', async () => {
    const used = await coordinator.tokens.issue('same', {});
    const short = await coordinator.tokens.issue('same', { ttlMs: 50 });
    if (used.outcome !== 'issued' || short.outcome !== 'issued') throw new Error('not issued');
    await coordinator.tokens.consume(used.token);
    await elapse(80); // the claim is about expiry itself: let the 50 ms TTL run out
    const unknown = createToken('same').token;
    const answers = await Promise.all([used.token, short.token, unknown].map((t) => coordinator.tokens.consume(t)));
    expect(answers).toEqual([{ consumed: false }, { consumed: false }, { consumed: false }]);
  });

  it('a malformed token string is refused without a Redis call', async () => {
    // A client that never connects: any command would hang or fail, so an answer proves no call was made.
    const offline = new Redis({ lazyConnect: true, enableOfflineQueue: false, port: 1 });
    const noRedis = new Coordinator({ redis: offline, keyPrefix: coordinator.keys.prefix });
    const malformed = [
      '',
      'v1',
      'v1..',
      'v2.YWxpY2U.' + 'a'.repeat(43),
      'v1.YWxpY2U.short',
      'v1.e30.' + 'a'.repeat(43),
      'v1.YWxpY2U.' + 'a'.repeat(43) + '!',
    ];
    for (const token of malformed) expect(await noRedis.tokens.consume(token), token).toEqual({ consumed: false });
    expect(await noRedis.sessions.admit('not a token')).toEqual({ outcome: 'token_invalid' });
    expect(offline.status).toBe('wait');
  });

  it('1,000 simultaneous consumes of one token: exactly one succeeds', async () => {
    const issued = await coordinator.tokens.issue('race', {});
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const consumers = coordinatorsOn(connectionPool(50), coordinator);
    await Promise.all(consumers.map((c) => c.redis.ping()));
    const answers = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => consumers[i % consumers.length]!.tokens.consume(issued.token)),
    );
    expect(answers.filter((a) => a.consumed)).toHaveLength(1);
    expect(answers.filter((a) => !a.consumed)).toHaveLength(999);
  });

  it('refuses bad metadata, ttl and lifetime before touching Redis', async () => {
    await expect(coordinator.tokens.issue('bad', { metadata: { big: 'x'.repeat(5000) } })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await expect(coordinator.tokens.issue('bad', { ttlMs: 0 })).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(
      coordinator.tokens.issue('bad', { lifetimeMs: coordinator.policy.maxLifetimeMs + 1 }),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(coordinator.tokens.issue('bad user!', {})).rejects.toMatchObject({ code: 'invalid_argument' });
    expect(await coordinator.redis.exists(coordinator.keys.user('bad').tokenRate)).toBe(0);
  });
});

describe('token issuing rate', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 3, tokenWindowMs: 60_000 } });

  it('more than tokenLimit tokens in the window are throttled with retry advice, and a refusal stores nothing', async () => {
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await coordinator.tokens.issue('busy', {}));
    expect(outcomes.map((o) => o.outcome)).toEqual(['issued', 'issued', 'issued', 'throttled', 'throttled']);
    const last = outcomes[4]!;
    expect(last.rate).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
    expect(last.rate.retryAfterMs).toBeGreaterThan(59_000);
    expect(last.rate.retryAfterMs).toBeLessThanOrEqual(60_000);
    const tokenKeys = (await coordinator.redis.keys(`${coordinator.keys.prefix}:{u:busy}:token:*`)).length;
    expect(tokenKeys).toBe(3);
    expect(await coordinator.redis.zcard(coordinator.keys.user('busy').tokenRate)).toBe(3);
  });
});
