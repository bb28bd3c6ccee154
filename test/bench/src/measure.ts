/** What one measurement found. */
export interface Sample {
  /** Completed operations per second. */
  readonly opsPerSec: number;
  /** Median latency, ms. */
  readonly p50: number;
  /** 99th percentile latency, ms. */
  readonly p99: number;
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Runs `op` from `callers` concurrent loops for `durationMs` (after a warm-up of a tenth of that) and
 * reports throughput and latency.
 */
export async function measure(
  callers: number,
  durationMs: number,
  op: (caller: number, i: number) => Promise<unknown>,
): Promise<Sample> {
  const warmUntil = performance.now() + durationMs / 10;
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      for (let i = 0; performance.now() < warmUntil; i++) await op(caller, i);
    }),
  );
  const latencies: number[] = [];
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      for (let i = 0; ; i++) {
        const t0 = performance.now();
        if (t0 >= end) break;
        await op(caller, i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = performance.now() - start;
  const sorted = Float64Array.from(latencies).sort();
  return {
    opsPerSec: (latencies.length / elapsed) * 1000,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
  };
}

/** The median of several samples, by throughput (their latencies come with it). */
export function median(samples: readonly Sample[]): Sample {
  const sorted = [...samples].sort((a, b) => a.opsPerSec - b.opsPerSec);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Runs `run` `times` times and keeps the median. */
export async function medianOf(times: number, run: () => Promise<Sample>): Promise<Sample> {
  const samples: Sample[] = [];
  for (let i = 0; i < times; i++) samples.push(await run());
  return median(samples);
}
