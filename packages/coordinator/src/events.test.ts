import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Coordinator } from './coordinator.js';
import {
  EVENT_RETENTION_MS,
  SlowReaderError,
  comparePositions,
  parseEventId,
  type EventFeed,
  type EventSubscription,
  type SessionEvent,
  type UserEvent,
  type UserStream,
} from './events/index.js';
import { defaultScriptsDir } from './script-loader.js';
import { connect, issueAndAdmit, testCoordinator } from './test-support/setup.js';

const worker = { workerId: 'host-a', leaseMs: 5000, graceMs: 1000 };

function feedOf(coordinator: Coordinator, options?: Parameters<Coordinator['eventFeed']>[0]): EventFeed {
  const feed = coordinator.eventFeed(options);
  onTestFinished(() => feed.close());
  return feed;
}

/** How long {@link collect} waits for the events a test expects, ms (well inside the test's own timeout). */
const COLLECT_MS = 10_000;

/**
 * Reads with `next` until it gives undefined, `count` items came, or {@link COLLECT_MS} passed: the
 * test then compares what came with all it expected, so a missing event fails with a diff, not a hang.
 */
async function readWithin<T>(next: () => Promise<T | undefined>, count = Number.POSITIVE_INFINITY): Promise<T[]> {
  const items: T[] = [];
  const deadline = new AbortController();
  const expired = sleep(COLLECT_MS, undefined, { signal: deadline.signal }).catch(() => undefined);
  try {
    while (items.length < count) {
      const item = await Promise.race([next(), expired]);
      if (item === undefined) break;
      items.push(item);
    }
  } finally {
    deadline.abort();
  }
  return items;
}

/** `count` events of `subscription`, or those that came in time (see {@link readWithin}). */
function collect(subscription: EventSubscription, count: number): Promise<SessionEvent[]> {
  return readWithin(() => subscription.next(), count);
}

/** A user's stream to its end, or what came in time (see {@link readWithin}). */
async function readToEnd(stream: UserStream): Promise<UserEvent[]> {
  const iterator = stream[Symbol.asyncIterator]();
  try {
    return await readWithin(async () => {
      const next = await iterator.next();
      return next.done === true ? undefined : next.value;
    });
  } finally {
    stream.close();
  }
}

/** The types of each user's events, by user, in the order they came. */
function typesByUser(events: readonly SessionEvent[]): Record<string, string[]> {
  const byUser: Record<string, string[]> = {};
  for (const event of events) (byUser[event.userId] ??= []).push(event.type);
  return byUser;
}

/** The event types of one {@link lifecycle}. */
const LIFECYCLE = ['pending', 'running', 'ready', 'stopping', 'stopped'];

/** What {@link typesByUser} gives when each of `users` went through {@link lifecycle} once. */
function lifecycles(users: readonly string[]): Record<string, string[]> {
  return Object.fromEntries(users.map((userId) => [userId, LIFECYCLE]));
}

/** The events of one user's sessions: pending → running → ready → stopping → stopped. */
async function lifecycle(coordinator: Coordinator, userId: string): Promise<void> {
  const admitted = await issueAndAdmit(coordinator, userId);
  const outcome = await coordinator.claims.claim(admitted, worker);
  if (!outcome.claimed) throw new Error('not claimed');
  await coordinator.claims.markReady(outcome.claim, `http://${userId}.example:8080`);
  await coordinator.sessions.requestStop(userId);
  await coordinator.claims.finish(outcome.claim, 'stopped', 143);
}

describe('session events', () => {
  it('each state change is one event, written by the script that made it, with its details', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe({ userId: 'ev-one' });
    await lifecycle(coordinator, 'ev-one');
    const events = await collect(subscription, 5);
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'ready', 'stopping', 'stopped']);
    const [pending, running, ready, stopping, stopped] = events;
    expect(pending).toMatchObject({ userId: 'ev-one', fence: 1, lifetimeMs: coordinator.policy.maxLifetimeMs });
    expect(running).toMatchObject({ workerId: 'host-a', sessionId: pending!.sessionId });
    expect(running!.deadline).toBeGreaterThan(running!.at);
    expect(ready).toMatchObject({ endpoint: 'http://ev-one.example:8080' });
    expect(stopping).toMatchObject({ workerId: 'host-a' });
    expect(stopped).toMatchObject({ exitCode: 143, workerId: 'host-a' });
    // The stream holds the same events under the same ids.
    const stream = await coordinator.redis.xrange(coordinator.keys.user('ev-one').events, '-', '+');
    expect(stream.map(([id]) => `${id}-${events[0]!.position.slot}`)).toEqual(events.map((e) => e.id));
  });

  it('a markReady that changes nothing emits nothing; a new endpoint emits ready again', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe({ userId: 'ev-ready' });
    const admitted = await issueAndAdmit(coordinator, 'ev-ready');
    const outcome = await coordinator.claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    await coordinator.claims.markReady(outcome.claim, 'a:1');
    await coordinator.claims.markReady(outcome.claim, 'a:1');
    await coordinator.claims.markReady(outcome.claim, 'b:2');
    await coordinator.claims.finish(outcome.claim, 'completed', 0);
    const events = await collect(subscription, 5);
    expect(events.map((e) => [e.type, e.endpoint])).toEqual([
      ['pending', undefined],
      ['running', undefined],
      ['ready', 'a:1'],
      ['ready', 'b:2'],
      ['completed', undefined],
    ]);
  });

  it('a failed ending its memory cap caused says why: out_of_memory, in the event and its stream entry', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe({ userId: 'ev-oom' });
    const admitted = await issueAndAdmit(coordinator, 'ev-oom');
    const outcome = await coordinator.claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    await coordinator.claims.finish(outcome.claim, 'failed', 137, 'out_of_memory');
    const events = await collect(subscription, 3);
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'failed']);
    expect(events.at(-1)).toMatchObject({
      type: 'failed',
      sessionId: admitted.sessionId,
      workerId: 'host-a',
      exitCode: 137,
      reason: 'out_of_memory',
    });
    const stream = await coordinator.redis.xrange(coordinator.keys.user('ev-oom').events, '-', '+');
    expect(JSON.parse(stream.at(-1)![1][1]!)).toMatchObject({ type: 'failed', reason: 'out_of_memory' });
  });

  it('lost says why: not_claimed for a session no host took, host_lost for one whose lease ran out', async () => {
    const coordinator = testCoordinator({ policy: { pendingTimeoutMs: 50 } });
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe();
    await issueAndAdmit(coordinator, 'ev-unclaimed');
    const claimedOne = await issueAndAdmit(coordinator, 'ev-dead-host');
    const claimed = await coordinator.claims.claim(claimedOne, { ...worker, leaseMs: 60 });
    expect(claimed.claimed).toBe(true);
    // Both become overdue; a read settles each (the sweeper would too).
    await expect
      .poll(async () => {
        await coordinator.sessions.settleAndRead('ev-unclaimed');
        await coordinator.sessions.settleAndRead('ev-dead-host');
        return (await coordinator.sessions.history('ev-dead-host')).length;
      })
      .toBe(1);
    const events = await collect(subscription, 5);
    expect(typesByUser(events)).toEqual({
      'ev-unclaimed': ['pending', 'lost'],
      'ev-dead-host': ['pending', 'running', 'lost'],
    });
    const lost = Object.fromEntries(events.filter((e) => e.type === 'lost').map((e) => [e.userId, e.reason]));
    expect(lost).toEqual({ 'ev-unclaimed': 'not_claimed', 'ev-dead-host': 'host_lost' });
  });

  it('an admission rolled back is withdrawn', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe({ userId: 'ev-withdrawn' });
    const issued = await coordinator.tokens.issue('ev-withdrawn');
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const admitted = await coordinator.sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error('not admitted');
    expect((await coordinator.sessions.cancelAdmission(issued.token, admitted.sessionId)).cancelled).toBe(true);
    const events = await collect(subscription, 2);
    expect(events.map((e) => [e.type, e.sessionId])).toEqual([
      ['pending', admitted.sessionId],
      ['withdrawn', admitted.sessionId],
    ]);
  });

  it('every reader gets every event of 300 concurrent sessions once, in id order, and a replay from any id gets exactly the rest', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const readers = await Promise.all(Array.from({ length: 3 }, () => feed.subscribe()));
    const users = Array.from({ length: 300 }, (_, i) => `ev-many-${i}`);
    await Promise.all(users.map((userId) => lifecycle(coordinator, userId)));
    const expected = users.length * 5;
    const seen = await Promise.all(readers.map((reader) => collect(reader, expected)));
    expect(typesByUser(seen[0]!)).toEqual(lifecycles(users));
    for (const events of seen) expect(events.map((e) => e.id)).toEqual(seen[0]!.map((e) => e.id));
    const ids = seen[0]!.map((e) => e.id);
    readers.slice(1).forEach((reader) => reader.close());
    expect(new Set(ids).size).toBe(expected);
    const positions = seen[0]!.map((e) => e.position);
    for (let i = 1; i < positions.length; i++)
      expect(comparePositions(positions[i - 1]!, positions[i]!)).toBeLessThan(0);
    // Per user, the lifecycle's order.
    const byUser = new Map<string, string[]>();
    for (const event of seen[0]!) byUser.set(event.userId, [...(byUser.get(event.userId) ?? []), event.type]);
    for (const types of byUser.values()) expect(types).toEqual(['pending', 'running', 'ready', 'stopping', 'stopped']);

    // Replays from a few ids: the events after each one, then the live ones; none twice, none missing.
    for (const cut of [0, 1, 777, expected - 2]) {
      const after = parseEventId(ids[cut]!)!;
      const replay = await feed.subscribe({ after });
      expect(replay.expired).toBe(false);
      await lifecycle(coordinator, `ev-after-${cut}`);
      const live = await collect(readers[0]!, 5);
      expect(typesByUser(live)).toEqual(lifecycles([`ev-after-${cut}`]));
      ids.push(...live.map((e) => e.id));
      const got = await collect(replay, ids.length - cut - 1);
      replay.close();
      expect(got.map((e) => e.id)).toEqual(ids.slice(cut + 1));
    }
  });

  it('a replay pages through a slot with more events than a page', async () => {
    const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 10 } });
    const feed = feedOf(coordinator, { pageSize: 3 });
    const first = await feed.subscribe({ userId: 'ev-paged' });
    for (let i = 0; i < 4; i++) await lifecycle(coordinator, 'ev-paged');
    const events = await collect(first, 20);
    expect(events.map((e) => e.type)).toEqual(Array<string[]>(4).fill(LIFECYCLE).flat());
    const replay = await feed.subscribe({ after: events[0]!.position, userId: 'ev-paged' });
    const again = await collect(replay, 19);
    expect(again.map((e) => e.id)).toEqual(events.slice(1).map((e) => e.id));
  });

  it('a lost subscription, lost again while it reopens, is read back: nothing lost, nothing twice, and it goes on', async () => {
    const coordinator = testCoordinator();
    const name = `cq-events-test-${Math.random().toString(36).slice(2)}`;
    const errors: string[] = [];
    const feed = feedOf(coordinator, { name, onError: (err) => errors.push((err as Error).message) });
    const reader = await feed.subscribe();
    const admin = connect();
    onTestFinished(() => admin.disconnect());
    /** Kills this feed's subscriber connection (and no other client), once it has one. */
    const killSubscriber = async (): Promise<void> => {
      let id: string | undefined;
      await expect
        .poll(async () => {
          const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
          id = new RegExp(`id=(\\d+) .*name=${name} `).exec(list)?.[1];
          return id;
        })
        .toBeDefined();
      await admin.call('CLIENT', 'KILL', 'ID', id!);
    };
    const users = Array.from({ length: 60 }, (_, i) => `ev-cut-${i}`);
    await Promise.all(
      users.map(async (userId, i) => {
        // Three losses while sessions change: the second and third as soon as a new subscriber appears.
        if (i === 20) for (let k = 0; k < 3; k++) await killSubscriber();
        await lifecycle(coordinator, userId);
      }),
    );
    const events = await collect(reader, users.length * 5);
    expect(typesByUser(events)).toEqual(lifecycles(users));
    expect(new Set(events.map((e) => e.id)).size).toBe(users.length * 5);
    for (let i = 1; i < events.length; i++)
      expect(comparePositions(events[i - 1]!.position, events[i]!.position)).toBeLessThan(0);
    expect(feed.readBacks).toBeGreaterThanOrEqual(3);
    expect(errors.some((message) => message.includes('event subscription was lost'))).toBe(true);
    // And it goes on.
    await lifecycle(coordinator, 'ev-cut-after');
    expect(typesByUser(await collect(reader, 5))).toEqual(lifecycles(['ev-cut-after']));
  });

  it('a reader resuming from an id newer than this process has handed on gets nothing it already has, then what follows', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    // An id a little ahead of everything this feed has released (as if read from a faster process).
    const after = { ms: Date.now() + 2000, seq: 0, slot: 0 };
    const ahead = await feed.subscribe({ after });
    const now = await feed.subscribe();
    await lifecycle(coordinator, 'ev-ahead-before');
    const before = await collect(now, 5);
    expect(typesByUser(before)).toEqual(lifecycles(['ev-ahead-before']));
    expect(before.every((e) => e.position.ms < after.ms)).toBe(true);
    // Once the clock has passed the reader's id, what happens next reaches it, and only that.
    await expect.poll(() => Date.now(), { timeout: 5000 }).toBeGreaterThan(after.ms);
    await lifecycle(coordinator, 'ev-ahead-after');
    expect(typesByUser(await collect(ahead, 5))).toEqual(lifecycles(['ev-ahead-after']));
    expect(ahead.queued).toBe(0);
  });

  it("a user's stream: the current state first, then only what moves the session on, and it ends after the ending", async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const admitted = await issueAndAdmit(coordinator, 'ev-follow');
    const outcome = await coordinator.claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    await coordinator.claims.markReady(outcome.claim, 'a:1');
    const stream = await feed.followUser('ev-follow');
    const read = readToEnd(stream);
    await coordinator.claims.markReady(outcome.claim, 'b:2');
    await coordinator.sessions.requestStop('ev-follow');
    await coordinator.claims.finish(outcome.claim, 'stopped', 143);
    // Ended by the stream itself: nothing after the ending is read, and its subscription is gone.
    expect((await read).map((e) => [e.type, e.endpoint])).toEqual([
      ['ready', 'a:1'],
      ['ready', 'b:2'],
      ['stopping', undefined],
      ['stopped', undefined],
    ]);
    expect(feed.subscribers).toBe(0);
  });

  it("a user's stream with no session waits for the next one, and past a withdrawn admission to the one after", async () => {
    const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 10 } });
    const feed = feedOf(coordinator);
    const read = readToEnd(await feed.followUser('ev-follow-next'));
    const issued = await coordinator.tokens.issue('ev-follow-next');
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const withdrawn = await coordinator.sessions.admit(issued.token);
    if (withdrawn.outcome !== 'admitted') throw new Error('not admitted');
    await coordinator.sessions.cancelAdmission(issued.token, withdrawn.sessionId);
    const admitted = await issueAndAdmit(coordinator, 'ev-follow-next');
    const outcome = await coordinator.claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    await coordinator.claims.finish(outcome.claim, 'completed', 0);
    expect((await read).map((e) => [e.type, e.sessionId])).toEqual([
      ['pending', withdrawn.sessionId],
      ['withdrawn', withdrawn.sessionId],
      ['pending', admitted.sessionId],
      ['running', admitted.sessionId],
      ['completed', admitted.sessionId],
    ]);
  });

  it('asking a stopping session to stop again emits nothing', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const subscription = await feed.subscribe({ userId: 'ev-stop-twice' });
    const admitted = await issueAndAdmit(coordinator, 'ev-stop-twice');
    const outcome = await coordinator.claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    await coordinator.sessions.requestStop('ev-stop-twice');
    await coordinator.sessions.requestStop('ev-stop-twice');
    await coordinator.claims.finish(outcome.claim, 'stopped', 143);
    const events = await collect(subscription, 4);
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'stopping', 'stopped']);
  });

  it('a reader that does not read is dropped once it holds maxQueued events; the feed goes on', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator, { maxQueued: 50 });
    const idle = await feed.subscribe();
    const busy = await feed.subscribe();
    // Rounds of 15 events that the busy reader reads as they come; the idle one reads none of 60.
    for (let round = 0; round < 4; round++) {
      const users = [0, 1, 2].map((i) => `ev-slow-${round}-${i}`);
      await Promise.all(users.map((userId) => lifecycle(coordinator, userId)));
      expect(typesByUser(await collect(busy, 15))).toEqual(lifecycles(users));
    }
    await expect(idle.next()).rejects.toBeInstanceOf(SlowReaderError);
    expect(idle.queued).toBe(0);
    expect(feed.subscribers).toBe(1);
  });

  it('a reader resuming from an id older than the retention is told so, then reads on live', async () => {
    const coordinator = testCoordinator();
    const feed = feedOf(coordinator);
    const stale = await feed.subscribe({ after: { ms: Date.now() - EVENT_RETENTION_MS - 60_000, seq: 0, slot: 0 } });
    expect(stale.expired).toBe(true);
    await lifecycle(coordinator, 'ev-stale');
    expect(typesByUser(await collect(stale, 5))).toEqual(lifecycles(['ev-stale']));
  });

  it('the newest events kept, oldest first, cost 16,384 commands plus at most the count, however many are kept', async () => {
    const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 10 } });
    const feed = feedOf(coordinator);
    const reader = await feed.subscribe();
    const users = Array.from({ length: 60 }, (_, i) => `ev-latest-${i}`);
    await Promise.all(users.map((userId) => lifecycle(coordinator, userId)));
    // One busy slot holds many of the newest: its later events must come from its second round.
    for (let i = 0; i < 4; i++) await lifecycle(coordinator, 'ev-latest-busy');
    const expected = users.length * 5 + 20;
    const all = await collect(reader, expected);
    expect(all).toHaveLength(expected);
    const through = all[all.length - 1]!.position.ms;
    const redis = connect();
    onTestFinished(() => redis.disconnect());
    // No other code reads the streams newest first: this counter is this read's alone.
    const xrevranges = async () =>
      Number(/cmdstat_xrevrange:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    for (const count of [1, 7, 50]) {
      const before = await xrevranges();
      const latest = await feed.latest(count, through);
      const used = (await xrevranges()) - before;
      expect(latest.map((e) => e.id)).toEqual(all.slice(-count).map((e) => e.id));
      expect(used).toBeGreaterThanOrEqual(16_384);
      expect(used).toBeLessThanOrEqual(16_384 + count);
    }
    // Only what was kept at or before `throughMs`.
    const cut = all[100]!.position.ms;
    const upTo = all.filter((e) => e.position.ms <= cut);
    expect((await feed.latest(10, cut)).map((e) => e.id)).toEqual(upTo.slice(-10).map((e) => e.id));
  });

  it('the newest events of fewer slots than the count are all their kept events, up to the count', async () => {
    const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 10 } });
    const feed = feedOf(coordinator);
    const reader = await feed.subscribe();
    for (let i = 0; i < 4; i++) await lifecycle(coordinator, 'ev-few-a');
    await lifecycle(coordinator, 'ev-few-b');
    const all = await collect(reader, 25);
    const through = all[all.length - 1]!.position.ms;
    expect((await feed.latest(50, through)).map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect((await feed.latest(12, through)).map((e) => e.id)).toEqual(all.slice(-12).map((e) => e.id));
    expect(await feed.latest(5, all[0]!.position.ms - 1)).toEqual([]);
  });

  it('parses only its own ids', () => {
    expect(parseEventId('1700000000000-0-16383')).toEqual({ ms: 1700000000000, seq: 0, slot: 16383 });
    for (const bad of ['', 'x', '1-2', '1-2-16384', '1-2-3-4', '-1-0-0', '1-99999999999999999-1'])
      expect(parseEventId(bad)).toBeUndefined();
  });

  it('the Lua retention is the one the feed assumes', () => {
    const lua = readFileSync(join(defaultScriptsDir, 'includes', 'events.lua'), 'utf8');
    expect(Number(/local EVENT_RETENTION_MS = (\d+)/.exec(lua)?.[1])).toBe(EVENT_RETENTION_MS);
  });
});
