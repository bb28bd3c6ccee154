import { startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { until } from '../support/processes.js';
import { startSystem } from '../support/system.js';
import { startTcpProxy } from '../support/tcp-proxy.js';

// A stop is told to the host on its channel; should that message be lost while the host's subscription
// stays open (a Cluster bus partition, a publish on a node the host is not subscribed to during a
// reshard), the nudge posted beside it arrives with the host's next heartbeat (every min(2 s, LEASE_MS/3)).
// With LEASE_MS 60000 a held session renews its own lease only every 400 s: without the nudge, the stop
// would wait for that.
const LEASE_MS = 60_000;
const STOP_WITHIN_MS = 5000;

describe('host-channel messages lost while the subscription stays open', () => {
  it('a stop still reaches the session within 5 s, by the heartbeat; the subscription is still open', async () => {
    const server = await startRedisServer({ args: ['--save', '', '--appendonly', 'no'] });
    onTestFinished(() => server.stop());
    // The host reaches Redis through a proxy that, once told, drops everything Redis sends on its
    // subscriber connections: subscribed as ever, hearing nothing.
    const proxy = await startTcpProxy(server.port);
    onTestFinished(() => proxy.close());
    const system = await startSystem({ redisUrl: server.url, workers: 0, workerEnv: { LEASE_MS: String(LEASE_MS) } });
    await system.addWorker('host-1', { REDIS_URL: proxy.url });
    const redis = system.connect();
    onTestFinished(() => redis.disconnect());

    const userId = 'nudge-lost';
    const session = await system.client.spawn((await system.client.issueToken({ userId })).token);
    await until(
      () => system.observed().some((o) => o.userId === userId && o.fence === session.fence),
      10_000,
      'the session beating',
    );
    proxy.dropSubscriptionMessages();
    const channels = (await redis.call('PUBSUB', 'CHANNELS', `${system.keyPrefix}:host:*`)) as string[];
    expect(channels).toEqual([`${system.keyPrefix}:host:host-1`]);

    const sentAt = Date.now();
    await system.client.stopSession(userId);
    const ended = await system.ended(userId, session.sessionId, STOP_WITHIN_MS + 5000);
    expect(ended.state).toBe('stopped');
    const lastBeat = Math.max(
      ...system.observed().flatMap((o) => (o.userId === userId && o.fence === session.fence ? [o.at] : [])),
    );
    expect(lastBeat - sentAt).toBeLessThan(STOP_WITHIN_MS);
    // The stop's message did reach the host's subscriber connection, and was dropped there.
    expect(proxy.dropped).toBeGreaterThan(0);
    // The subscription stayed open all along: the message was lost, not the connection.
    expect(await redis.call('PUBSUB', 'NUMSUB', `${system.keyPrefix}:host:host-1`)).toEqual([
      `${system.keyPrefix}:host:host-1`,
      1,
    ]);
  });
});
