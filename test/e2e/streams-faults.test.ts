import { startRedisServer } from '@cq/test-harness';
import { describe, it, onTestFinished } from 'vitest';
import { expectThroughFault, killSubscribers } from '../support/streams.js';
import { startSystem } from '../support/system.js';
import { currentTarget } from '../support/target.js';

describe('output follows and event streams through faults', () => {
  it('Redis drops every subscriber connection (CLIENT KILL TYPE pubsub): follows and event readers go on, none lost or repeated, new ones are live', async () => {
    const target = currentTarget();
    const system = await startSystem({ target, workers: 1 });
    await expectThroughFault(system, 'pubsub-killed', () => killSubscribers(target));
  });

  it('Redis restarts (SIGKILL, AOF everysec): follows and event readers go on, none lost or repeated, new ones are live', async () => {
    const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'everysec'] });
    onTestFinished(() => server.stop());
    const system = await startSystem({ redisUrl: server.url, workers: 1 });
    await expectThroughFault(system, 'restarted', async () => {
      await server.halt('SIGKILL');
      await server.resume();
    });
  });
});
