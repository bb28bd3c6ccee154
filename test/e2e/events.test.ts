import type { CoordinatorClient, StreamedEvent } from '@cq/client';
import { Keys, comparePositions, parseEventId } from '@cq/coordinator';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { addedRate, callRates, commandCalls, totalRate } from '../support/commands.js';
import { until } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';
import { cleanUp } from '@cq/test-harness';

type SessionStreamed = Exclude<StreamedEvent, { type: 'error' }>;

/** Opens an event stream and resolves once the server has subscribed it, with the stream being read. */
async function open(
  client: CoordinatorClient,
  options: { userId?: string; lastEventId?: string; until?: (events: StreamedEvent[]) => boolean } = {},
): Promise<{ events: StreamedEvent[]; done: Promise<StreamedEvent[]>; stop: () => void }> {
  const controller = new AbortController();
  const events: StreamedEvent[] = [];
  let opened!: () => void;
  const isOpen = new Promise<void>((resolve) => (opened = resolve));
  const stream = client.events({
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.lastEventId === undefined ? {} : { lastEventId: options.lastEventId }),
    signal: controller.signal,
    onOpen: opened,
  });
  const done = (async () => {
    for await (const event of stream) {
      events.push(event);
      if (options.until?.(events)) break;
    }
    return events;
  })();
  await Promise.race([isOpen, done]);
  return { events, done, stop: () => controller.abort() };
}

/** Spawns a session for `userId` with `metadata` through the API. */
async function spawn(client: CoordinatorClient, userId: string, metadata: Record<string, unknown> = {}) {
  return client.spawn((await client.issueToken({ userId, metadata })).token);
}

/** Every event the slots' streams hold under the system's prefix, in id order: what Redis says happened. */
async function eventsInRedis(system: System): Promise<string[]> {
  const redis = system.connect();
  const keys = new Keys(system.keyPrefix);
  try {
    const ids: Array<{ id: string; position: NonNullable<ReturnType<typeof parseEventId>> }> = [];
    for (let first = 0; first < 16384; first += 2048) {
      const slots = Array.from({ length: 2048 }, (_, i) => first + i);
      const pages = await Promise.all(slots.map((slot) => redis.xrange(keys.events(slot), '-', '+')));
      pages.forEach((entries, i) => {
        for (const [entryId] of entries) {
          const id = `${entryId}-${slots[i]!}`;
          ids.push({ id, position: parseEventId(id)! });
        }
      });
    }
    return ids.sort((a, b) => comparePositions(a.position, b.position)).map((e) => e.id);
  } finally {
    redis.disconnect();
  }
}

/**
 * A system of its own for one describe block, started before its tests and stopped after them, so that
 * the systems of this file never run side by side (the command count below sees only its own).
 */
function systemFor(options: Parameters<typeof startSystem>[0]): {
  readonly system: System;
  readonly client: CoordinatorClient;
} {
  let system: System | undefined;
  beforeAll(async () => {
    system = await startSystem(options);
  });
  cleanUp(async () => {
    await Promise.all([system?.api.stop(), ...(system?.workers ?? []).map((worker) => worker.stop())]);
  });
  return {
    get system() {
      return system!;
    },
    get client() {
      return system!.client;
    },
  };
}

const idOf = (event: StreamedEvent): string => (event.type === 'error' ? 'error' : event.id!);

describe('session events end to end', () => {
  describe('one user', () => {
    const running = systemFor({});

    it('a session that announces readiness streams pending, running, ready (with its endpoint), completed (with its exit code), then the stream ends', async () => {
      const { client } = running;
      const stream = await open(client, { userId: 'ev-ready' });
      const admitted = await spawn(client, 'ev-ready', {
        readyAfterMs: 200,
        endpoint: 'http://10.9.8.7:8888/lab',
        durationMs: 700,
      });
      const events = (await stream.done) as SessionStreamed[];
      expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'ready', 'completed']);
      for (const event of events) expect(event).toMatchObject({ sessionId: admitted.sessionId, fence: admitted.fence });
      expect(events[0]).toMatchObject({ lifetimeMs: expect.any(Number) as number });
      expect(events[1]).toMatchObject({ workerId: 'host-1', deadline: expect.any(String) as string });
      expect(events[2]).toMatchObject({ endpoint: 'http://10.9.8.7:8888/lab' });
      expect(events[3]).toMatchObject({ exitCode: 0, workerId: 'host-1' });
      // Times are Redis's, in order.
      const times = events.map((e) => Date.parse(e.at));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
    });

    it('a late subscriber gets the current state first, then what follows', async () => {
      const { client } = running;
      const admitted = await spawn(client, 'ev-late', { readyAfterMs: 50, endpoint: 'late:7000', durationMs: 1500 });
      await until(async () => (await client.findSession('ev-late'))?.ready === true, 10_000, 'ready');
      const stream = await open(client, { userId: 'ev-late' });
      const events = await stream.done;
      expect(events.map((e) => e.type)).toEqual(['ready', 'completed']);
      expect(events[0]).toMatchObject({ sessionId: admitted.sessionId, endpoint: 'late:7000' });
    });
  });

  describe('why a session was lost', () => {
    // No host at first: an admitted session waits; PENDING_TIMEOUT_MS is short.
    const running = systemFor({
      workers: 0,
      apiEnv: { CAPACITY_CHECK: 'false', PENDING_TIMEOUT_MS: '1500' },
      workerEnv: { LEASE_MS: '3000' },
    });

    it('not_claimed: no worker host took it within PENDING_TIMEOUT_MS', async () => {
      const { client } = running;
      const stream = await open(client, { userId: 'ev-unclaimed' });
      const admitted = await spawn(client, 'ev-unclaimed');
      const events = await stream.done;
      expect(events.map((e) => [e.type, 'reason' in e ? e.reason : undefined])).toEqual([
        ['pending', undefined],
        ['lost', 'not_claimed'],
      ]);
      expect(events[1]).toMatchObject({ sessionId: admitted.sessionId });
    });

    it("host_lost: its worker host's whole process group was SIGKILLed", async () => {
      const { client, system } = running;
      const host = await system.addWorker('host-doomed', {}, { ownGroup: true });
      const stream = await open(client, { userId: 'ev-doomed' });
      const admitted = await spawn(client, 'ev-doomed');
      await until(() => stream.events.some((e) => e.type === 'running'), 10_000, 'running');
      process.kill(-host.child.pid!, 'SIGKILL');
      const events = await stream.done;
      expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'lost']);
      expect(events[2]).toMatchObject({ sessionId: admitted.sessionId, reason: 'host_lost', workerId: 'host-doomed' });
    });
  });

  describe('every session of every user', () => {
    // Sessions that announce themselves and end at once: the test is about events, not about processes.
    const running = systemFor({
      workers: 3,
      // The sweeper reads every slot's index (16,384 commands) each interval: slow it down, so that the
      // commands counted below are the work's, not the clock's. Nothing here is left to the sweep.
      apiEnv: { CAPACITY_CHECK: 'false', PENDING_TIMEOUT_MS: '60000', SWEEP_INTERVAL_MS: '600000' },
      workerEnv: {
        SLOTS: '40',
        SESSION_COMMAND: `printf '{"ready":true,"endpoint":"%s"}\\n' "$SESSION_ID" >&3; sleep 0.05`,
      },
    });

    /** Runs `rounds` sessions one after another for each user, each followed on its own user stream. */
    async function workload(users: string[], rounds: number): Promise<void> {
      const { client } = running;
      await Promise.all(
        users.map(async (userId) => {
          for (let round = 0; round < rounds; round++) {
            const stream = await open(client, { userId });
            const admitted = await spawn(client, userId);
            const events = await stream.done;
            expect(events.at(-1)).toMatchObject({ type: 'completed', sessionId: admitted.sessionId });
          }
        }),
      );
    }

    it('1,000 sessions of 100 users over 3 hosts: every change arrives, in order per session; a reader that reconnects with Last-Event-ID gets exactly the rest', async () => {
      const { client, system } = running;
      const steady = await open(client);
      // A reader that drops its connection twice (after 1,500 events, then 200 more) and each time resumes
      // from the last id it got, while the sessions go on.
      const resumed: StreamedEvent[] = [];
      const first = await open(client, { until: (events) => events.length === 1500 });
      let last: Awaited<ReturnType<typeof open>> | undefined;
      const resuming = (async () => {
        resumed.push(...(await first.done));
        const second = await open(client, { lastEventId: idOf(resumed.at(-1)!), until: (got) => got.length === 200 });
        resumed.push(...(await second.done));
        last = await open(client, { lastEventId: idOf(resumed.at(-1)!) });
      })();

      const users = Array.from({ length: 100 }, (_, i) => `ev-all-${i}`);
      await workload(users, 10);
      const expected = await eventsInRedis(system);
      await until(() => steady.events.length >= expected.length, 30_000, 'the steady reader has every event');
      steady.stop();
      await resuming;
      await until(() => resumed.length + last!.events.length >= expected.length, 30_000, 'the resuming reader too');
      last!.stop();
      resumed.push(...(await last!.done));

      expect(steady.events.map(idOf)).toEqual(expected);
      expect(resumed.map(idOf)).toEqual(expected);
      // 1,000 sessions, each pending → running → ready → completed, in that order.
      const bySession = new Map<string, string[]>();
      for (const event of steady.events as SessionStreamed[])
        bySession.set(event.sessionId, [...(bySession.get(event.sessionId) ?? []), event.type]);
      expect(bySession.size).toBe(1000);
      for (const types of bySession.values()) expect(types).toEqual(['pending', 'running', 'ready', 'completed']);
    }, 300_000);

    it('200 readers cost Redis no more commands per second than one reader does', async () => {
      const { client, system } = running;
      // The same paced work (a session every 100 ms), counted over a window of at least 5 s, once per
      // reader count, as commands per second: what the hosts' timers do per second is then alike too.
      // The window is longer than the work takes even on 2 busy cores, so both runs count over the same
      // length of time: a run whose work outlasted a shorter window divided the same commands by more
      // seconds, and 200 readers (which take CPU) then looked cheaper than one.
      const WINDOW_MS = 8000;
      const cost = async (readers: number, users: string[]): Promise<Map<string, number>> => {
        const streams = await Promise.all(
          Array.from({ length: readers }, () =>
            open(client, { until: (events) => events.filter((e) => e.type === 'completed').length === users.length }),
          ),
        );
        const before = await commandCalls(system);
        const startedAt = performance.now();
        await Promise.all(
          users.map(async (userId, i) => {
            await sleep(i * 100);
            await workload([userId], 1);
          }),
        );
        await Promise.all(streams.map((stream) => stream.done));
        for (const stream of streams) expect(stream.events).toHaveLength(users.length * 4);
        await sleep(Math.max(0, WINDOW_MS - (performance.now() - startedAt)));
        return callRates(before, await commandCalls(system), performance.now() - startedAt);
      };
      // Each script is loaded into each master at its first use there (NOSCRIPT, then EVAL): 57 such
      // loads, counted in whichever run came first, made the first run look dearer by 40 to 60 commands
      // per second. A round of the same work first, not counted, so both runs measure the steady state.
      await Promise.all(Array.from({ length: 30 }, (_, i) => workload([`ev-cost-warm-${i}`], 1)));
      const one = await cost(
        1,
        Array.from({ length: 30 }, (_, i) => `ev-cost-1-${i}`),
      );
      const many = await cost(
        200,
        Array.from({ length: 30 }, (_, i) => `ev-cost-200-${i}`),
      );
      const { added, top } = addedRate(one, many);
      console.log(
        `Redis commands per second, 30 paced sessions: ${Math.round(totalRate(one))} with 1 reader, ` +
          `${Math.round(totalRate(many))} with 200 readers; 200 readers add ${added.toFixed(1)}/s (${top || 'nothing'})`,
      );
      // Command by command, the increases only: the hosts' and the API's timers run a little less often
      // while 200 readers take CPU, and a total would let that saving hide a cost the readers add.
      // Within 40 commands per second (a fifth of a command per reader per second): readers cost Redis
      // nothing of their own.
      expect(totalRate(one)).toBeGreaterThan(0);
      expect(added, top).toBeLessThan(40);
    }, 120_000);
  });
});
