import { UnavailableError, type OutputLineData, type StreamedEvent } from '@cq/client';
import { expect, onTestFinished } from 'vitest';
import { until } from './processes.js';
import { allLines, spawnWith } from './output.js';
import type { System } from './system.js';
import { connect, type RedisTarget } from './target.js';

// Helpers of the tests of output follows and event streams through Redis faults.

/** Collects what a stream yields until it ends or its signal aborts; `error` is what ended it otherwise. */
export function collect<T>(stream: AsyncIterable<T>): { items: T[]; done: Promise<void>; error: () => unknown } {
  const items: T[] = [];
  let error: unknown;
  const done = (async () => {
    try {
      for await (const item of stream) items.push(item);
    } catch (err) {
      error = err;
    }
  })();
  return { items, done, error: () => error };
}

/** Resolves once `onOpen` was called, or rejects with what ended the stream before it opened. */
async function opened<T>(start: (onOpen: () => void) => ReturnType<typeof collect<T>>) {
  let onOpen!: () => void;
  const open = new Promise<void>((resolve) => (onOpen = resolve));
  const stream = start(onOpen);
  await Promise.race([
    open,
    stream.done.then(() => Promise.reject(stream.error() ?? new Error('the stream ended unopened'))),
  ]);
  return stream;
}

/** Opens a follow of a session's output, resolved once the server has subscribed it. */
const follow = (system: System, userId: string, sessionId: string, signal: AbortSignal) =>
  opened((onOpen) => collect<OutputLineData>(system.client.followLogs(userId, sessionId, { signal, onOpen })));

/** Opens a reader of every session event (`/v1/events`), resolved once subscribed. */
const readEvents = (system: System, signal: AbortSignal) =>
  opened((onOpen) => collect<StreamedEvent>(system.client.events({ signal, onOpen })));

/** Every line once, in the order of the ids: no line repeated, ids increasing. */
function expectOnceInOrder(lines: OutputLineData[]): void {
  const ids = lines.map((l) => l.id);
  expect(new Set(ids).size).toBe(ids.length);
  const key = (id: string) => id.split('-').map(Number) as [number, number];
  for (let i = 1; i < ids.length; i++) {
    const [a, b] = [key(ids[i - 1]!), key(ids[i]!)];
    expect(a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]), `${ids[i - 1]} before ${ids[i]}`).toBe(true);
  }
}

/**
 * Drives the fault while a session prints a tick every 100 ms and a follower and an event reader are
 * open; then checks that both went on by themselves, that new ones are live, and that the follower got
 * every kept line exactly once, in order.
 */
export async function expectThroughFault(
  system: System,
  userId: string,
  fault: () => Promise<void>,
  sessionMs = 6000,
): Promise<void> {
  const stop = new AbortController();
  onTestFinished(() => stop.abort());
  const events = await readEvents(system, stop.signal);
  // The user of the session started after the fault has had one before it: a slot that has seen a claim
  // waits out its own lease after Redis may have lost writes, not the default one (docs/failure-modes.md).
  const first = await spawnWith(system, `${userId}-next`, { durationMs: 50 });
  await system.ended(`${userId}-next`, first.sessionId);
  const { sessionId } = await spawnWith(system, userId, { tickEveryMs: 100, durationMs: sessionMs });
  await until(() => events.items.some((e) => e.type === 'running' && e.sessionId === sessionId), 15_000, 'running');
  const before = await follow(system, userId, sessionId, stop.signal);
  await until(
    () => before.items.filter((l) => l.line.startsWith('tick ')).length >= 3,
    10_000,
    'ticks before the fault',
  );

  await fault();
  await until(
    async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200,
    10_000,
    'the API reaches Redis',
  );

  // Within a second of Redis answering again, the follower that was open receives lines printed since,
  // and a follow opened now is live (it does not only read back what was kept when it opened).
  const answering = Date.now();
  const printedSince = (lines: OutputLineData[], since: number) =>
    lines.some((l) => /^tick \d+ (\S+)/.test(l.line) && Number(/^tick \d+ (\S+)/.exec(l.line)![1]) > since);
  await until(() => printedSince(before.items, answering), 1000, 'lines resume within 1 s of Redis answering again');
  const after = await follow(system, userId, sessionId, stop.signal);
  const openedAt = Date.now();
  await until(() => printedSince(after.items, openedAt), 1000, 'a follow opened after the fault is live');
  // The event reader that was open, and one opened now, see the next session's events.
  const newReader = await readEvents(system, stop.signal);
  // Refused (503, Retry-After) while Redis may still have lost sessions running: asked again with the
  // same token until admitted (a refusal never spends it).
  const token = (await system.client.issueToken({ userId: `${userId}-next`, metadata: { durationMs: 200 } })).token;
  let next: { sessionId: string } | undefined;
  await until(
    async () => {
      next = await system.client.spawn(token).catch((err: unknown) => {
        if (err instanceof UnavailableError) return undefined;
        throw err;
      });
      return next !== undefined;
    },
    15_000,
    'a session admitted after the fault',
  );
  for (const reader of [events, newReader])
    await until(
      () => reader.items.some((e) => e.type === 'completed' && e.sessionId === next!.sessionId),
      15_000,
      'events of a session started after the fault',
    );

  // The session ends: both followers end, each with every kept line once, in order.
  await Promise.all([before.done, after.done]);
  expect(before.error()).toBeUndefined();
  expect(after.error()).toBeUndefined();
  const kept = await allLines(system.client, userId, sessionId);
  for (const follower of [before, after]) {
    expectOnceInOrder(follower.items);
    // Whatever Redis kept, the follower got (a restart may lose lines Redis had already announced).
    const got = new Set(follower.items.map((l) => l.id));
    expect(kept.filter((l) => !got.has(l.id)).map((l) => l.line)).toEqual([]);
  }
  // No event of the first session was delivered twice to the reader that stayed open.
  const ids = events.items.flatMap((e) => (e.type === 'error' || e.id === undefined ? [] : [e.id]));
  expect(new Set(ids).size).toBe(ids.length);
  stop.abort();
}

/** Kills every Pub/Sub connection on every node of the target (what a proxy timeout or restart does to them). */
export async function killSubscribers(target: RedisTarget): Promise<void> {
  const redis = connect(target);
  try {
    await redis.ping();
    const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
    for (const node of nodes) await node.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  } finally {
    redis.disconnect();
  }
}
