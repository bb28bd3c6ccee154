import { randomUUID } from 'node:crypto';
import { describe, expect, it, onTestFinished } from 'vitest';
import { issueAndAdmit, testCoordinator } from '../test-support/setup.js';
import { comparePositions } from './codec.js';
import type { EventSubscription } from './event-subscription.js';
import type { SessionEvent } from './session-event.js';

/** The events `subscription` hands on, as they come. */
function drain(subscription: EventSubscription): SessionEvent[] {
  const got: SessionEvent[] = [];
  void (async () => {
    for await (const event of subscription) got.push(event);
  })();
  return got;
}

describe('the event feed through a lost subscription', () => {
  const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 100 } });

  it('an open reader gets every event once and in order, and a reader subscribed after the loss is live', async () => {
    const name = `cq-events-${randomUUID()}`;
    const feed = coordinator.eventFeed({ name });
    onTestFinished(() => feed.close());
    const early = drain(await feed.subscribe());
    const users = Array.from({ length: 40 }, (_, i) => `lost-${i}`);
    let late: SessionEvent[] = [];
    for (const [i, userId] of users.entries()) {
      if (i === 20) {
        // Only this feed's connection: other files use the same Redis.
        const clients = String(await coordinator.redis.client('LIST'));
        await coordinator.redis.client('KILL', 'ID', new RegExp(`^id=(\\d+) .* name=${name} `, 'm').exec(clients)![1]!);
        late = drain(await feed.subscribe());
      }
      await issueAndAdmit(coordinator, userId);
    }
    await expect.poll(() => early.map((e) => e.userId).sort(), { timeout: 10_000 }).toEqual(users.toSorted());
    for (let i = 1; i < early.length; i++)
      expect(comparePositions(early[i - 1]!.position, early[i]!.position)).toBeLessThan(0);
    // The late reader gets what came after it joined: the newest of the same events, each once.
    await expect
      .poll(() => late.map((e) => e.userId), { timeout: 10_000 })
      .toEqual(expect.arrayContaining(users.slice(20)));
    expect(late).toEqual(early.slice(early.length - late.length));
  });
});
