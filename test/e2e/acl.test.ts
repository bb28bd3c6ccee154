import { startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startSystem } from '../support/system.js';

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
