import { Coordinator, UnavailableError } from '@cq/coordinator';
import { cleanUp, isolatedRedis } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import type { SpawnJob } from './job.js';
import type { SpawnProducer } from './producer.js';
import { AdmissionReconciler } from './reconciler.js';
import { SpawnService } from './spawn-service.js';

const { redis, keyPrefix } = isolatedRedis(inject('redisUrl'));
const coordinator = new Coordinator({
  redis,
  keyPrefix,
  policy: { tokenLimit: 1000, spawnIntervalMs: 1, spawnBurst: 1000 },
});
const log = pino({ level: 'silent' });

/** A queue whose answer the test decides: taken, refused, or never answered. */
class FakeProducer implements SpawnProducer {
  readonly jobs: SpawnJob[] = [];
  mode: 'take' | 'refuse' | 'hang' | 'take-then-hang' = 'take';
  /** Runs when a job goes through in `take-then-hang` (a worker host claims it). */
  onTaken: (job: SpawnJob) => Promise<void> = async () => {};
  async enqueue(job: SpawnJob): Promise<void> {
    if (this.mode === 'refuse') throw new Error('queue unreachable');
    if (this.mode === 'hang') return new Promise(() => {});
    this.jobs.push(job);
    if (this.mode === 'take-then-hang') {
      await this.onTaken(job);
      return new Promise(() => {});
    }
  }
}

const tokenFor = async (userId: string): Promise<string> => {
  const issued = await coordinator.tokens.issue(userId);
  if (issued.outcome !== 'issued') throw new Error(issued.outcome);
  return issued.token;
};

describe('the spawn saga: admit → enqueue → roll back → reconcile', () => {
  const producer = new FakeProducer();
  const service = new SpawnService({
    sessions: coordinator.sessions,
    producer,
    log,
    answerWithinMs: 300,
    stepMinMs: 50,
  });
  cleanUp(() => service.close());
  afterEach(() => {
    producer.mode = 'take';
  });

  it('admitted and queued: one job carrying the session, the token used', async () => {
    const token = await tokenFor('saga-a');
    const outcome = await service.spawn(token);
    expect(outcome).toMatchObject({ outcome: 'admitted', userId: 'saga-a', fence: 1, confirmedByWorker: false });
    expect(producer.jobs.at(-1)).toEqual({
      userId: 'saga-a',
      sessionId: (outcome as { sessionId: string }).sessionId,
      fence: 1,
      pool: 'default',
    });
    expect(await service.spawn(token)).toEqual({ outcome: 'token_invalid' });
  });

  it('refusals of the admission come back as they are, and nothing is queued', async () => {
    const before = producer.jobs.length;
    expect(await service.spawn('v1.bm9ib2R5.' + 'A'.repeat(43))).toEqual({ outcome: 'token_invalid' });
    await service.spawn(await tokenFor('saga-b'));
    expect(await service.spawn(await tokenFor('saga-b'))).toMatchObject({
      outcome: 'session_exists',
      userId: 'saga-b',
    });
    expect(producer.jobs.length).toBe(before + 1);
  });

  it('a queue that refuses: the admission is rolled back within the budget and the same token works again', async () => {
    const token = await tokenFor('saga-c');
    producer.mode = 'refuse';
    expect(await service.spawn(token)).toMatchObject({ outcome: 'unavailable', why: 'rolled_back' });
    expect(await coordinator.sessions.settleAndRead('saga-c')).toBeUndefined();
    producer.mode = 'take';
    expect(await service.spawn(token)).toMatchObject({ outcome: 'admitted', userId: 'saga-c' });
  });

  it('a queue that never answers: the answer still comes within the budget, and the token works again', async () => {
    const token = await tokenFor('saga-d');
    producer.mode = 'hang';
    const started = performance.now();
    expect(await service.spawn(token)).toMatchObject({ outcome: 'unavailable', why: 'rolled_back' });
    expect(performance.now() - started).toBeLessThan(300 + 200);
    producer.mode = 'take';
    expect((await service.spawn(token)).outcome).toBe('admitted');
  });

  it('an enqueue whose answer is lost after a worker host took the job: admitted, confirmed by the worker', async () => {
    const token = await tokenFor('saga-e');
    producer.mode = 'take-then-hang';
    producer.onTaken = async (job) =>
      void (await coordinator.claims.claim(job, { workerId: 'w', leaseMs: 5000, graceMs: 100 }));
    expect(await service.spawn(token)).toMatchObject({
      outcome: 'admitted',
      userId: 'saga-e',
      confirmedByWorker: true,
    });
    expect((await coordinator.sessions.settleAndRead('saga-e'))?.state).toBe('running');
  });

  it('an admission Redis could not answer is left to the reconciler and its error rethrown', async () => {
    const down = new Coordinator({
      redis: new Redis('redis://127.0.0.1:1', {
        maxRetriesPerRequest: 0,
        lazyConnect: true,
        enableOfflineQueue: false,
      }),
      keyPrefix,
    });
    const offline = new SpawnService({ sessions: down.sessions, producer, log, answerWithinMs: 300 });
    await expect(offline.spawn(await tokenFor('saga-f'))).rejects.toBeInstanceOf(UnavailableError);
    expect(offline.reconciler.size).toBe(1);
    await offline.reconciler.close();
    down.redis.disconnect();
  });
});

describe('the admission reconciler (fake timers)', () => {
  afterEach(() => vi.useRealTimers());

  it('retries every 500 ms while Redis is away, then cancels the admission and stops', async () => {
    vi.useFakeTimers();
    let reachable = false;
    const calls: string[] = [];
    const sessions = {
      cancelAdmission: async (_token: string, sessionId: string) => {
        calls.push(sessionId);
        if (!reachable) throw new UnavailableError(new Error('connection refused'));
        return { cancelled: true, tokenRestored: true };
      },
    };
    const reconciler = new AdmissionReconciler(sessions, log);
    reconciler.add('token', 's-1');
    await vi.advanceTimersByTimeAsync(500);
    await vi.advanceTimersByTimeAsync(500);
    expect(calls).toEqual(['s-1', 's-1']);
    expect(reconciler.size).toBe(1);
    reachable = true;
    await vi.advanceTimersByTimeAsync(500);
    expect(calls).toHaveLength(3);
    expect(reconciler.size).toBe(0);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toHaveLength(3);
  });

  it('gives up after 9 minutes (the tombstone of a cancelled admission lives 10)', async () => {
    vi.useFakeTimers();
    const sessions = { cancelAdmission: async () => Promise.reject(new UnavailableError(new Error('down'))) };
    const reconciler = new AdmissionReconciler(sessions, log);
    reconciler.add('token', 's-2');
    await vi.advanceTimersByTimeAsync(8 * 60_000);
    expect(reconciler.size).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000 + 1000);
    expect(reconciler.size).toBe(0);
  });
});

describe('the capacity step: a slot is held after the admission, or the admission is rolled back', () => {
  const producer = new FakeProducer();
  /** The registry, with an answer the test can lose: the hold is taken, then the call never returns. */
  let loseAnswer = false;
  const workers = {
    reserve: async (...args: Parameters<typeof coordinator.workers.reserve>) => {
      const outcome = await coordinator.workers.reserve(...args);
      return loseAnswer ? new Promise<never>(() => {}) : outcome;
    },
    release: (ids: readonly string[]) => coordinator.workers.release(ids),
  };
  const service = new SpawnService({
    sessions: coordinator.sessions,
    producer,
    log,
    answerWithinMs: 300,
    stepMinMs: 50,
    capacity: { workers, holdMs: 60_000 },
  });
  cleanUp(() => service.close());
  afterEach(() => {
    producer.mode = 'take';
    loseAnswer = false;
  });
  const held = async () => (await coordinator.workers.capacity()).held;

  it('no slot free: no_capacity, nothing queued, no session, and the token works again; a pool no host serves is told from a full one', async () => {
    const token = await tokenFor('cap-none');
    const before = producer.jobs.length;
    // No host takes sessions of the pool: an operator's matter, so a longer wait is advised.
    expect(await service.spawn(token)).toEqual({
      outcome: 'no_capacity',
      retryAfterMs: 10_000,
      pool: 'default',
      served: false,
    });
    expect(producer.jobs.length).toBe(before);
    expect(await coordinator.sessions.settleAndRead('cap-none')).toBeUndefined();
    await coordinator.workers.heartbeat({ workerId: 'saga-host', slots: 1, busy: 0, startedAt: 1 }, 60_000);
    expect(await service.spawn(token)).toMatchObject({ outcome: 'admitted', userId: 'cap-none' });
    expect(await held()).toBe(1);
    // Its one slot taken: full, look again in a second.
    expect(await service.spawn(await tokenFor('cap-full'))).toEqual({
      outcome: 'no_capacity',
      retryAfterMs: 1000,
      pool: 'default',
      served: true,
    });
  });

  it('a hold whose answer is lost: the admission is rolled back within the budget and the hold given back', async () => {
    await coordinator.workers.heartbeat({ workerId: 'saga-host', slots: 5, busy: 0, startedAt: 1 }, 60_000);
    const before = await held();
    const token = await tokenFor('cap-lost');
    loseAnswer = true;
    const started = performance.now();
    expect(await service.spawn(token)).toMatchObject({ outcome: 'unavailable', why: 'rolled_back' });
    expect(performance.now() - started).toBeLessThan(300 + 200);
    await vi.waitFor(async () => expect(await held()).toBe(before), { timeout: 2000 });
    loseAnswer = false;
    expect(await service.spawn(token)).toMatchObject({ outcome: 'admitted', userId: 'cap-lost' });
  });

  it('a queue that refuses: the admission is rolled back and its hold given back', async () => {
    const before = await held();
    const token = await tokenFor('cap-queue');
    producer.mode = 'refuse';
    expect(await service.spawn(token)).toMatchObject({ outcome: 'unavailable', why: 'rolled_back' });
    await vi.waitFor(async () => expect(await held()).toBe(before), { timeout: 2000 });
  });
});
