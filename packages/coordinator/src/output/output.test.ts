import { randomUUID } from 'node:crypto';
import { watchClient } from '@cq/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import type { Coordinator } from '../coordinator.js';
import { InvalidArgumentError } from '../errors.js';
import type { Claim } from '../session-types.js';
import { connectionPool, coordinatorsOn, testCoordinator } from '../test-support/setup.js';
import type { OutputFeedOptions, OutputFollower } from './output-feed.js';
import type { OutputLine } from './output-store.js';

const worker = { workerId: 'host-o', leaseMs: 5000, graceMs: 1000 };
const keeping = { keepLines: 100, keepForMs: 60_000, droppedBytes: 0 };

async function running(c: Coordinator, userId: string): Promise<Claim> {
  const issued = await c.tokens.issue(userId);
  if (issued.outcome !== 'issued') throw new Error('throttled');
  const admitted = await c.sessions.admit(issued.token);
  if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
  const outcome = await c.claims.claim(admitted, worker);
  if (!outcome.claimed) throw new Error(`not claimed: ${outcome.reason}`);
  return outcome.claim;
}

const out = (n: number, from = 0): Array<{ stream: 'stdout' | 'stderr'; line: string }> =>
  Array.from({ length: n }, (_, i) => ({
    stream: (i + from) % 2 === 0 ? 'stdout' : 'stderr',
    line: `line ${i + from}`,
  }));

describe("a session's output", () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000 } });
  const { output } = coordinator;

  it('is kept in order with stream and time, and read in exact pages after a line id', async () => {
    const claim = await running(coordinator, 'out-pages');
    await output.append('out-pages', claim.sessionId, [], keeping);
    expect(await output.read('out-pages', claim.sessionId)).toEqual({
      lines: [],
      droppedBytes: 0,
      more: false,
      live: true,
    });
    const before = Date.now();
    await output.append('out-pages', claim.sessionId, out(3), keeping);
    await output.append('out-pages', claim.sessionId, out(4, 3), keeping);
    const all = await output.read('out-pages', claim.sessionId);
    expect(all!.lines.map((l) => [l.stream, l.line])).toEqual(out(7).map((l) => [l.stream, l.line]));
    for (const line of all!.lines) expect(Math.abs(line.at - before)).toBeLessThan(5000);
    const first = await output.read('out-pages', claim.sessionId, { limit: 3 });
    expect(first!.lines.map((l) => l.line)).toEqual(['line 0', 'line 1', 'line 2']);
    expect(first!.more).toBe(true);
    const second = await output.read('out-pages', claim.sessionId, { after: first!.lines[2]!.id, limit: 4 });
    expect(second!.lines.map((l) => l.line)).toEqual(['line 3', 'line 4', 'line 5', 'line 6']);
    expect(second!.more).toBe(false);
    expect((await output.read('out-pages', claim.sessionId, { after: second!.lines[3]!.id }))!.lines).toEqual([]);
  });

  it('keeps only the newest lines, records the dropped bytes, and expires when its time is up', async () => {
    const claim = await running(coordinator, 'out-trim');
    await output.append('out-trim', claim.sessionId, out(25), { keepLines: 10, keepForMs: 60_000, droppedBytes: 77 });
    const page = await output.read('out-trim', claim.sessionId);
    expect(page!.lines.map((l) => l.line)).toEqual(out(10, 15).map((l) => l.line));
    expect(page!.droppedBytes).toBe(77);
    const keys = coordinator.keys.output('out-trim', claim.sessionId);
    await output.append('out-trim', claim.sessionId, [], { keepLines: 10, keepForMs: 30_000, droppedBytes: 77 });
    for (const key of [keys.lines, keys.record]) {
      const ttl = await coordinator.redis.pttl(key);
      expect(ttl).toBeGreaterThan(25_000);
      expect(ttl).toBeLessThanOrEqual(30_000);
    }
  });

  it("is not found for an unknown session or another user's session, and refuses a bad page", async () => {
    const claim = await running(coordinator, 'out-owner');
    await output.append('out-owner', claim.sessionId, out(1), keeping);
    expect(await output.read('out-owner', 'no-such-session')).toBeUndefined();
    expect(await output.read('out-other', claim.sessionId)).toBeUndefined();
    await expect(output.read('out-owner', claim.sessionId, { after: 'x' })).rejects.toThrow(InvalidArgumentError);
    await expect(output.read('out-owner', claim.sessionId, { limit: 1001 })).rejects.toThrow(InvalidArgumentError);
  });

  it('of a live session with no output yet reads empty; once ended and not kept it is not found', async () => {
    const claim = await running(coordinator, 'out-none');
    expect(await output.read('out-none', claim.sessionId)).toMatchObject({ lines: [], live: true });
    await coordinator.claims.finish(claim, 'completed', 0);
    expect(await output.read('out-none', claim.sessionId)).toBeUndefined();
  });
});

describe("following a session's output", () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000 } });
  const { output } = coordinator;
  const [appender] = coordinatorsOn(connectionPool(1), coordinator) as [Coordinator];

  function feeds(options?: OutputFeedOptions): ReturnType<Coordinator['outputFeed']> {
    const events = coordinator.eventFeed();
    const feed = coordinator.outputFeed(events, options);
    onTestFinished(async () => {
      feed.close();
      await events.close();
    });
    return feed;
  }

  async function take(follower: AsyncIterable<OutputLine>, n: number): Promise<string[]> {
    const got: string[] = [];
    if (n === 0) return got;
    for await (const line of follower) {
      got.push(line.line);
      if (got.length === n) break;
    }
    return got;
  }

  /** The lines `follower` hands on, as they come. */
  function drain(follower: OutputFollower | undefined): string[] {
    const got: string[] = [];
    void (async () => {
      for await (const line of follower!) got.push(line.line);
    })();
    return got;
  }

  it('hands on what is kept, then new lines as they come, and ends after the session ends', async () => {
    const feed = feeds();
    const claim = await running(coordinator, 'follow-live');
    await output.append('follow-live', claim.sessionId, out(3), keeping);
    const follower = await feed.follow('follow-live', claim.sessionId);
    const iterator = follower![Symbol.asyncIterator]();
    const got: string[] = [];
    for (let i = 0; i < 3; i++) got.push((await iterator.next()).value!.line);
    const next = iterator.next();
    await output.append('follow-live', claim.sessionId, out(2, 3), keeping);
    got.push((await next).value!.line, (await iterator.next()).value!.line);
    await output.append('follow-live', claim.sessionId, out(1, 5), keeping);
    await coordinator.claims.finish(claim, 'completed', 0);
    for (;;) {
      const step = await iterator.next();
      if (step.done === true) break;
      got.push(step.value.line);
    }
    expect(got).toEqual(out(6).map((l) => l.line));
    expect(feed.sessions).toBe(0);
  });

  it('resumes after a line id with exactly the rest', async () => {
    const feed = feeds();
    const claim = await running(coordinator, 'follow-resume');
    await output.append('follow-resume', claim.sessionId, out(5), keeping);
    const page = await output.read('follow-resume', claim.sessionId);
    await coordinator.claims.finish(claim, 'completed', 0);
    const follower = await feed.follow('follow-resume', claim.sessionId, page!.lines[1]!.id);
    expect(await take(follower!, Infinity)).toEqual(['line 2', 'line 3', 'line 4']);
  });

  it('is not found for an unknown session', async () => {
    const feed = feeds();
    expect(await feed.follow('follow-none', 'no-such-session')).toBeUndefined();
    expect(feed.sessions).toBe(0);
  });

  it('with 100 followers of one session, each new batch is read once for all of them', async () => {
    const feed = feeds();
    const claim = await running(coordinator, 'follow-many');
    await output.append('follow-many', claim.sessionId, [], keeping);
    const followers = await Promise.all(Array.from({ length: 100 }, () => feed.follow('follow-many', claim.sessionId)));
    expect(feed.sessions).toBe(1);
    const iterators = followers.map((f) => f![Symbol.asyncIterator]());
    const watch = await watchClient(coordinator.redis as Redis, inject('redisUrl'));
    onTestFinished(() => watch.stop());
    const batches = 10;
    for (let b = 0; b < batches; b++) {
      const next = iterators.map((it) => it.next());
      await output.append('follow-many', claim.sessionId, out(1, b), keeping);
      const lines = await Promise.all(next);
      expect(new Set(lines.map((l) => l.value!.line))).toEqual(new Set([`line ${b}`]));
    }
    await watch.settle();
    // Per batch the append and the tail's one read (100 followers each reading would be 100 reads).
    expect(watch.seen.map((c) => c.args[0]?.toLowerCase())).toEqual(
      Array.from({ length: batches * 2 }, () => 'evalsha'),
    );
    for (const it of iterators) await it.return?.(undefined);
    expect(feed.sessions).toBe(0);
  });

  it('through a lost subscription, an open follower gets every line once and in order, and a new follow is live', async () => {
    const name = `cq-output-${randomUUID()}`;
    const feed = feeds({ name });
    const [a, b] = [await running(coordinator, 'follow-lost-a'), await running(coordinator, 'follow-lost-b')];
    const append = async (i: number): Promise<void> => {
      await output.append('follow-lost-a', a.sessionId, out(1, i), keeping);
      await output.append('follow-lost-b', b.sessionId, out(1, i), keeping);
    };
    await append(0);
    const early = drain(await feed.follow('follow-lost-a', a.sessionId));
    let late: string[] = [];
    for (let i = 1; i < 60; i++) {
      if (i === 20) {
        // Only this feed's connection: other files use the same Redis.
        const clients = String(await coordinator.redis.client('LIST'));
        await coordinator.redis.client('KILL', 'ID', new RegExp(`^id=(\\d+) .* name=${name} `, 'm').exec(clients)![1]!);
        late = drain(await feed.follow('follow-lost-b', b.sessionId));
      }
      await append(i);
    }
    const lines = out(60).map((l) => l.line);
    await expect.poll(() => early, { timeout: 10_000 }).toEqual(lines);
    await expect.poll(() => late, { timeout: 10_000 }).toEqual(lines);
  });

  it('100 followers joining while lines come each get every kept line once, in order', async () => {
    const feed = feeds();
    // Ten followers join each of ten sessions at once: the first one's tail is set up while the others join.
    const sessions = await Promise.all(Array.from({ length: 10 }, (_, i) => running(coordinator, `follow-join-${i}`)));
    const joined = sessions.map(async ({ userId, sessionId }) => {
      const { channel } = coordinator.keys.output(userId, sessionId);
      let n = 0;
      const append = (): Promise<unknown> =>
        appender.output.append(userId, sessionId, out(1, n++), { ...keeping, keepLines: 1000 });
      const joining = Promise.all(Array.from({ length: 10 }, () => feed.follow(userId, sessionId)));
      // Lines come, on a connection of their own, while the followers join and until the feed has
      // subscribed to the session's channel, then again once every follower has joined.
      do await append();
      while (Number((await appender.redis.pubsub('NUMSUB', channel))[1]) === 0 && n < 500);
      const followers = (await joining).map(drain);
      for (let i = 0; i < 10; i++) await append();
      return { followers, lines: out(n).map((l) => l.line) };
    });
    for (const { followers, lines } of await Promise.all(joined))
      for (const got of followers) await expect.poll(() => got, { timeout: 10_000 }).toEqual(lines);
  });
});
