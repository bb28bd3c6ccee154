// The memory section of npm run bench: Memory and growth.
import { Coordinator } from '@cq/coordinator';
import { type Bench, fmt } from '../bench.js';
import { measure, medianOf, type Sample } from '../measure.js';

export async function benchMemorySection(bench: Bench): Promise<void> {
  const { quick, runs: RUNS, seconds: SECONDS, client, out, target, results } = bench;
  out('## Memory and growth');
  out();
  const mem = new Coordinator({ redis: client(), keyPrefix: 'mem', policy: { spawnIntervalMs: 10_000 } });
  const issued = await mem.tokens.issue('memory-user', { metadata: { durationMs: 5000 } });
  if (issued.outcome !== 'issued') throw new Error('not issued');
  const tokenKey = mem.tokens.keyOf({
    userId: 'memory-user',
    digest: (await import('@cq/coordinator')).parseToken(issued.token)!.digest,
  });
  const usage = async (key: string): Promise<number> =>
    Number((await mem.redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
  const tokenBytes = await usage(tokenKey);
  await mem.gcraLimiter({ name: 'm', intervalMs: 10_000 }).check('memory-user');
  const limiterBytes = await usage(mem.keys.limiter('m', 'memory-user'));
  const admitted = await mem.sessions.admit(issued.token);
  if (admitted.outcome !== 'admitted') throw new Error('not admitted');
  await mem.claims.claim(admitted, { workerId: 'm', leaseMs: 60_000, graceMs: 1000 });
  const userKeys = mem.keys.user('memory-user');
  const sessionBytes = (await usage(userKeys.session)) + (await usage(userKeys.lease)) + (await usage(userKeys.fence));
  const throttleBytes = await usage(userKeys.spawnThrottle);
  out('| what | bytes (MEMORY USAGE) |');
  out('| --- | ---: |');
  out(`| one spawn token (digest key with metadata) | ${tokenBytes} |`);
  out(`| one GCRA limiter key | ${limiterBytes} |`);
  out(`| one live session (session hash + lease + fence counter) | ${sessionBytes} |`);
  out(`| the user's spawn throttle | ${throttleBytes} |`);
  out();
  const GROW = quick ? 100_000 : 1_000_000;
  const growth: Record<string, Sample> = {};
  for (const users of [1000, GROW]) {
    await mem.redis.flushall();
    const limiter = mem.gcraLimiter({ name: 'grow', intervalMs: 1, burst: 1000 });
    for (let i = 0; i < users; i += 10_000) {
      const pipeline = mem.redis.pipeline();
      for (let j = i; j < Math.min(users, i + 10_000); j++)
        pipeline.set(mem.keys.limiter('grow', `g${j}`), '0', 'PX', 3_600_000);
      await pipeline.exec();
    }
    growth[users] = await medianOf(RUNS, () =>
      measure(50, SECONDS * 1000, (caller, i) => limiter.check(`g${(caller * 7919 + i * 104_729) % users}`)),
    );
  }
  out(`| GCRA checks, 50 callers | ops/s | p99 ms |`);
  out('| --- | ---: | ---: |');
  for (const [users, s] of Object.entries(growth))
    out(`| with ${fmt(Number(users))} users' keys present | ${fmt(s.opsPerSec)} | ${fmt(s.p99, 2)} |`);
  target(
    `limiter ops/s with ${fmt(GROW)} users ≥ 90% of that with 1,000`,
    growth[GROW]!.opsPerSec / growth[1000]!.opsPerSec,
    0.9,
  );
  results['memory'] = { tokenBytes, limiterBytes, sessionBytes, throttleBytes, growth };
  out();
}
