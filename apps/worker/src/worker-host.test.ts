import { setTimeout as sleep } from 'node:timers/promises';
import { Coordinator, Keys } from '@cq/coordinator';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, spawnQueueShards } from '@cq/spawn-handoff';
import { isolatedRedis, until } from '@cq/test-harness';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { loadWorkerConfig } from './config.js';
import type { SessionExit, SessionLauncher } from './session-process.js';
import { WorkerHost } from './worker-host.js';

describe('a worker host on a sharded spawn queue', () => {
  const { redis, keyPrefix } = isolatedRedis(inject('redisUrl'));

  it('takes jobs from every shard but never runs more than SLOTS sessions at once; jobs it hands back lose no attempt', async () => {
    const SHARDS = 4;
    const SLOTS = 2;
    const USERS = 24;
    const redisUrl = inject('redisUrl');
    const queues = spawnQueueShards(keyPrefix, SHARDS).map(
      (shard) => new Queue(shard.name, { connection: redis, prefix: shard.prefix }),
    );
    const logs: Array<{ msg: string }> = [];
    let running = 0;
    let most = 0;
    const ran: string[] = [];
    // Each session runs for 40 ms, its workload, then exits 0.
    const launcher: SessionLauncher = {
      launch: (spec) => {
        running++;
        most = Math.max(most, running);
        ran.push(spec.sessionEnv['USER_ID']!);
        const exited = sleep(40).then((): SessionExit => {
          running--;
          return { exitCode: 0 };
        });
        return { exited, leaseHolds: () => {}, deadlineMoved: () => {}, terminate: () => {}, kill: () => {} };
      },
    };
    const host = new WorkerHost({
      config: loadWorkerConfig({
        REDIS_URL: redisUrl,
        KEY_PREFIX: keyPrefix,
        SLOTS: String(SLOTS),
        SPAWN_QUEUE_SHARDS: String(SHARDS),
        LOG_LEVEL: 'silent',
        WORKER_ID: 'sharded',
        REDIS_ACCEPT_RISKS: 'no-persistence',
      }),
      logger: pino(
        { level: 'debug' },
        { write: (line: string) => void logs.push(JSON.parse(line) as { msg: string }) },
      ),
      launcher,
    });
    onTestFinished(async () => {
      await host.stop();
      await Promise.all(queues.map((queue) => queue.close()));
    });

    const coordinator = new Coordinator({
      redis,
      keyPrefix,
      policy: { tokenLimit: 1000, spawnIntervalMs: 1, spawnBurst: 1000 },
    });
    const keys = new Keys(keyPrefix);
    const users = Array.from({ length: USERS }, (_, i) => `sharded-${i}`);
    const shardsUsed = new Set(users.map((u) => keys.queueShardOf(u, SHARDS)));
    expect(shardsUsed.size).toBe(SHARDS);
    // All jobs are queued before the host starts, so every shard's worker finds work at once.
    for (const userId of users) {
      const issued = await coordinator.tokens.issue(userId);
      if (issued.outcome !== 'issued') throw new Error(issued.outcome);
      const admitted = await coordinator.sessions.admit(issued.token);
      if (admitted.outcome !== 'admitted') throw new Error(admitted.outcome);
      await queues[keys.queueShardOf(userId, SHARDS)]!.add(
        SPAWN_JOB,
        { userId, sessionId: admitted.sessionId, fence: admitted.fence },
        { ...spawnJobOptions, jobId: spawnJobId(userId, admitted.fence) },
      );
    }
    await host.start();
    const ended = async (): Promise<number> =>
      (await Promise.all(users.map((u) => coordinator.sessions.history(u)))).filter((h) => h.length > 0).length;
    await until(async () => (await ended()) === USERS, 20_000, `all ${USERS} sessions ended`);
    for (const userId of users)
      expect((await coordinator.sessions.history(userId))[0]).toMatchObject({ state: 'completed' });
    expect(ran.sort()).toEqual([...users].sort());
    expect(most).toBe(SLOTS);
    const jobs = (
      await Promise.all(queues.map((queue) => queue.getJobs(['completed', 'failed', 'wait', 'active'])))
    ).flat();
    expect(jobs).toHaveLength(USERS);
    // The shards' workers did race for the last slots, and the losers handed their jobs back.
    const handedBack = logs.filter((l) => l.msg === 'all slots busy; job handed back').length;
    console.info(`${handedBack} jobs handed back`);
    expect(handedBack).toBeGreaterThan(0);
    for (const job of jobs) {
      expect(await job.getState()).toBe('completed');
      expect(job.attemptsMade).toBeLessThanOrEqual(1);
    }
  });

  it('refuses to start when the API on the same KEY_PREFIX uses another SPAWN_QUEUE_SHARDS, naming the variable', async () => {
    const redisUrl = inject('redisUrl');
    await redis.set(new Keys(keyPrefix).queueShards(), '3');
    const host = new WorkerHost({
      config: loadWorkerConfig({
        REDIS_URL: redisUrl,
        KEY_PREFIX: keyPrefix,
        LOG_LEVEL: 'silent',
        WORKER_ID: 'mismatched',
        REDIS_ACCEPT_RISKS: 'no-persistence',
      }),
      logger: pino({ level: 'silent' }),
    });
    onTestFinished(() => host.stop());
    await expect(host.start()).rejects.toThrow(
      `SPAWN_QUEUE_SHARDS is 1 here but the API on KEY_PREFIX "${keyPrefix}" uses 3: set the same value on every API instance and worker host`,
    );
  });
});
