import { beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';

// A stop or a lifetime change reaches the worker host on its own channel, at once, not with the session's
// next renewal. With LEASE_MS 60000 the host renews each session every 20 s: each change below must
// reach the session (judged by its own heartbeats) long before a renewal could have brought it.
const LEASE_MS = 60_000;
const RENEWAL_MS = LEASE_MS / 3;

describe('stops and lifetime changes reach the host on its channel, not with the next renewal', () => {
  let system: System;
  beforeAll(async () => {
    system = await startSystem({ workerEnv: { LEASE_MS: String(LEASE_MS) } });
  });

  /** A running session of the user, its process beating (its own observer lines). */
  async function running(userId: string): Promise<{ sessionId: string; fence: number }> {
    const session = await system.client.spawn((await system.client.issueToken({ userId })).token);
    await until(
      () => system.observed().some((o) => o.userId === userId && o.fence === session.fence),
      10_000,
      `${userId}'s session beating`,
    );
    return session;
  }

  /** The last instant (epoch ms) the user's session was seen alive by its own heartbeats. */
  const lastBeat = (userId: string, fence: number): number =>
    Math.max(...system.observed().flatMap((o) => (o.userId === userId && o.fence === fence ? [o.at] : [])));

  it('DELETE: the session is told to stop and ends stopped, long before its next renewal', async () => {
    const session = await running('channel-stop');
    const sentAt = Date.now();
    await system.client.stopSession('channel-stop');
    const ended = await system.ended('channel-stop', session.sessionId, RENEWAL_MS);
    expect(ended.state).toBe('stopped');
    expect(lastBeat('channel-stop', session.fence) - sentAt).toBeLessThan(RENEWAL_MS / 4);
  });

  it('PATCH lifetime: a session cut to 1 s from now ends then, long before its next renewal', async () => {
    const session = await running('channel-lifetime');
    const sentAt = Date.now();
    await system.client.extend('channel-lifetime', 1000);
    await system.ended('channel-lifetime', session.sessionId, RENEWAL_MS);
    const beat = lastBeat('channel-lifetime', session.fence);
    expect(beat - sentAt).toBeGreaterThanOrEqual(900);
    expect(beat - sentAt).toBeLessThan(RENEWAL_MS / 4);
  });

  it("the host's subscription killed by Redis: it comes back by itself, and a stop sent after it does arrives at once", async () => {
    const session = await running('channel-killed');
    const redis = system.connect();
    // The host's channel connections, node by node (CLIENT LIST; it subscribes on any one node, a replica too).
    await redis.ping();
    const nodes = 'nodes' in redis ? redis.nodes('all') : [redis];
    const hostConnections = async (): Promise<Array<{ node: (typeof nodes)[number]; id: string }>> =>
      (
        await Promise.all(
          nodes.map(async (node) =>
            ((await node.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string)
              .split('\n')
              .filter((line) => / name=cq-host:host-1 /.test(line))
              .map((line) => ({ node, id: /^id=(\d+) /.exec(line)![1]! })),
          ),
        )
      ).flat();
    try {
      let before: Array<{ node: (typeof nodes)[number]; id: string }> = [];
      await until(async () => (before = await hostConnections()).length === 1, 10_000, "the host's channel subscribed");
      // Redis drops it (as a restart, a proxy timeout or CLIENT KILL does).
      await before[0]!.node.call('CLIENT', 'KILL', 'ID', before[0]!.id);
      await until(
        async () => (await hostConnections()).some((c) => c.id !== before[0]!.id || c.node !== before[0]!.node),
        10_000,
        "the host's channel subscribed again, by itself",
      );
    } finally {
      redis.disconnect();
    }
    const sentAt = Date.now();
    await system.client.stopSession('channel-killed');
    expect((await system.ended('channel-killed', session.sessionId, RENEWAL_MS)).state).toBe('stopped');
    expect(lastBeat('channel-killed', session.fence) - sentAt).toBeLessThan(RENEWAL_MS / 4);
  });
});
