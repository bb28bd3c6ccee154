import { Coordinator, type EventFeed, type EventSubscription } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { cleanUp, deletePrefix, randomPrefix, until } from '@cq/test-harness';
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import type { DeliveryJob } from './delivery-job.js';
import { WebhookDispatcher } from './dispatcher.js';

describe('closing the webhook dispatcher', () => {
  it('does not wait for an event subscription that is still starting (the feed closes only after it)', async () => {
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    const coordinator = new Coordinator({ redis, keyPrefix: randomPrefix() });
    cleanUp(async () => {
      await deletePrefix(redis, coordinator.keys.prefix);
      redis.disconnect();
    });
    await coordinator.webhooks.create({ url: 'https://example.com/hook', events: [], sealedSecret: 'x' });
    // A feed whose start never ends (as one waiting on a master that does not answer its marks), and
    // whose subscription, should it come after all, must be closed.
    let subscribeCalls = 0;
    let lateClosed = false;
    let arrive: ((s: EventSubscription) => void) | undefined;
    const events = {
      subscribe: () => {
        subscribeCalls++;
        return new Promise<EventSubscription>((resolve) => (arrive = resolve));
      },
    } as unknown as EventFeed;
    const dispatcher = new WebhookDispatcher({
      coordinator,
      events,
      queue: {} as Queue<DeliveryJob>,
      log: createLogger({ level: 'silent', name: 'dispatcher-test' }),
      leaseMs: 60_000,
    });
    dispatcher.start();
    await until(() => subscribeCalls === 1, 10_000, 'the dispatcher subscribing');

    await dispatcher.close();
    // It gave the lease back on its way out: another process can take it at once.
    const lease = await coordinator.leases.acquire('webhook-dispatch', { leaseMs: 1000, maxLifetimeMs: 5000 });
    expect(lease.acquired).toBe(true);
    arrive!({ close: () => void (lateClosed = true) } as unknown as EventSubscription);
    await until(() => lateClosed, 5000, 'the late subscription closed');
  });
});
