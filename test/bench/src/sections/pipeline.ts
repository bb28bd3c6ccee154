// The pipeline section of npm run bench: Pipeline.
import { spawn } from 'node:child_process';
import { Coordinator } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, spawnQueueShards } from '@cq/spawn-handoff';
import { WorkerHost, loadWorkerConfig, type SessionLauncher } from '@cq/worker';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { type Bench, fmt, ratio } from '../bench.js';

export async function benchPipelineSection(bench: Bench): Promise<void> {
  const { quick, runs: RUNS, server, client, out, target, results } = bench;
  const SESSIONS = quick ? 2000 : 10_000;
  const SLOTS = 50;
  out(`## Pipeline: sessions admitted → completed on one in-process worker host, ${SLOTS} slots (median of ${RUNS})`);
  out();
  const noop: SessionLauncher = {
    launch: () => ({
      exited: Promise.resolve({ exitCode: 0 }),
      leaseHolds: () => {},
      deadlineMoved: () => {},
      terminate: () => {},
      kill: () => {},
    }),
  };
  // One shard, as SPAWN_QUEUE_SHARDS defaults to; the bare run uses the same queue layout.
  const shardOf = (prefix: string) => spawnQueueShards(prefix, 1)[0]!;
  const completedAll = async (prefix: string, total: number, start: () => Promise<void>): Promise<number> => {
    const events = new QueueEvents(shardOf(prefix).name, {
      connection: new Redis(server.url, { maxRetriesPerRequest: null }),
      prefix: shardOf(prefix).prefix,
    });
    await events.waitUntilReady();
    let done = 0;
    const finished = new Promise<void>((resolve) => events.on('completed', () => void (++done === total && resolve())));
    const t0 = performance.now();
    await start();
    await finished;
    const seconds = (performance.now() - t0) / 1000;
    await events.close();
    return total / seconds;
  };
  /** Tokens for `count` users of `coordinator`, issued in batches. */
  const issueTokens = async (coordinator: Coordinator, count: number): Promise<string[]> => {
    const tokens: string[] = [];
    for (let i = 0; i < count; i += 500) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(500, count - i) }, (_, j) => coordinator.tokens.issue(`p${i + j}`)),
      );
      for (const issued of batch) if (issued.outcome === 'issued') tokens.push(issued.token);
    }
    return tokens;
  };
  /** Sessions/s through our whole pipeline on one in-process worker host with `launcher` (default: the session runtime). */
  const oursPipeline = async (
    prefix: string,
    total: number,
    launcher: SessionLauncher | undefined,
    sessionCommand?: string,
  ): Promise<number> => {
    const coordinator = new Coordinator({
      redis: client(),
      keyPrefix: prefix,
      policy: { tokenLimit: 1_000_000, spawnIntervalMs: 1, spawnBurst: 1_000_000 },
    });
    const tokens = await issueTokens(coordinator, total);
    const queue = new Queue(shardOf(prefix).name, { connection: client(), prefix: shardOf(prefix).prefix });
    const env: Record<string, string> = {
      REDIS_URL: server.url,
      KEY_PREFIX: prefix,
      SLOTS: String(SLOTS),
      LOG_LEVEL: 'silent',
      WORKER_ID: `bench-${prefix}`,
      // The bench's Redis keeps nothing on disk (a throwaway).
      REDIS_ACCEPT_RISKS: 'no-persistence',
    };
    if (sessionCommand !== undefined) env['SESSION_COMMAND'] = sessionCommand;
    const host = new WorkerHost({
      config: loadWorkerConfig(env),
      logger: createLogger({ level: 'silent', name: 'bench' }),
      ...(launcher === undefined ? {} : { launcher }),
    });
    const rate = await completedAll(prefix, total, async () => {
      await host.start();
      let next = 0;
      await Promise.all(
        Array.from({ length: SLOTS }, async () => {
          while (next < tokens.length) {
            const token = tokens[next++]!;
            const admitted = await coordinator.sessions.admit(token);
            if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
            await queue.add(
              SPAWN_JOB,
              { userId: admitted.userId, sessionId: admitted.sessionId, fence: admitted.fence },
              { ...spawnJobOptions, jobId: spawnJobId(admitted.userId, admitted.fence) },
            );
          }
        }),
      );
    });
    await host.stop();
    await queue.close();
    return rate;
  };
  /** Jobs/s through bare BullMQ: add → a job that runs `job` (the limit). */
  const barePipeline = async (prefix: string, total: number, job: () => Promise<unknown>): Promise<number> => {
    const bareQueue = new Queue(shardOf(prefix).name, { connection: client(), prefix: shardOf(prefix).prefix });
    let worker: Worker | undefined;
    const rate = await completedAll(prefix, total, async () => {
      worker = new Worker(shardOf(prefix).name, job, {
        connection: new Redis(server.url, { maxRetriesPerRequest: null }),
        prefix: shardOf(prefix).prefix,
        concurrency: SLOTS,
      });
      let next = 0;
      await Promise.all(
        Array.from({ length: SLOTS }, async () => {
          while (next < total) {
            const i = next++;
            await bareQueue.add(
              SPAWN_JOB,
              { userId: `p${i}`, sessionId: crypto.randomUUID(), fence: 1 },
              { ...spawnJobOptions, jobId: spawnJobId(`p${i}`, 1) },
            );
          }
        }),
      );
    });
    await worker?.close();
    await bareQueue.close();
    return rate;
  };
  const REAL_SESSIONS = quick ? 300 : 2000;
  const shExit = (): Promise<unknown> =>
    new Promise((resolve) =>
      spawn('/bin/sh', ['-c', 'exit 0'], { stdio: 'ignore', detached: true }).once('exit', resolve),
    );
  const pipelineRuns: Array<{ ours: number; bare: number; oursReal: number; bareReal: number }> = [];
  for (let run = 0; run < RUNS; run++) {
    pipelineRuns.push({
      ours: await oursPipeline(`pipe${run}`, SESSIONS, noop),
      bare: await barePipeline(`bare${run}`, SESSIONS, async () => ({})),
      oursReal: await oursPipeline(`real${run}`, REAL_SESSIONS, undefined, 'exit 0'),
      bareReal: await barePipeline(`barereal${run}`, REAL_SESSIONS, shExit),
    });
  }
  const median = (pick: (r: (typeof pipelineRuns)[number]) => number): (typeof pipelineRuns)[number] =>
    [...pipelineRuns].sort((a, b) => pick(a) - pick(b))[Math.floor(pipelineRuns.length / 2)]!;
  const pipe = median((r) => r.ours / r.bare);
  const real = median((r) => r.oursReal / r.bareReal);
  out('| pipeline | sessions/s | vs its limit |');
  out('| --- | ---: | ---: |');
  out(
    `| ours: token → admit → queue → claim → session process \`sh -c 'exit 0'\` (runtime) → finish, ${fmt(REAL_SESSIONS)} sessions | ${fmt(real.oursReal)} | ${ratio(real.oursReal, real.bareReal)} |`,
  );
  out(
    `| limit: bare BullMQ, add → a job that spawns \`sh -c 'exit 0'\` and waits for it | ${fmt(real.bareReal)} | 1.00× |`,
  );
  out(
    `| in-process launcher (no process started): token → admit → queue → claim → finish, ${fmt(SESSIONS)} sessions | ${fmt(pipe.ours)} | ${ratio(pipe.ours, pipe.bare)} |`,
  );
  out(`| limit: bare BullMQ, add → no-op job | ${fmt(pipe.bare)} | 1.00× |`);
  target(
    'pipeline with real session processes ≥ 80% of bare BullMQ spawning the same',
    real.oursReal / real.bareReal,
    0.8,
  );
  target('pipeline, in-process launcher ≥ 80% of bare BullMQ', pipe.ours / pipe.bare, 0.8);
  results['pipeline'] = {
    sessions: SESSIONS,
    realSessions: REAL_SESSIONS,
    slots: SLOTS,
    ...pipe,
    oursReal: real.oursReal,
    bareReal: real.bareReal,
    runs: pipelineRuns,
  };
  out();
}
