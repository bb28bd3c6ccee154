// What every section of npm run bench shares: the run's settings, the bench's own Redis, its output (Markdown
// on stdout), the targets it checks and the results it writes to bench-results.json.
import type { RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';

/** Distinct keys the throughput sections spread their callers over. */
export const KEYS = 100_000;
/** Connections of the HTTP load generator. */
export const CONNECTIONS_HTTP = 50;

export const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '–';
export const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;

export interface Target {
  name: string;
  value: number;
  target: number;
  atMost: boolean;
  met: boolean;
}

export interface Bench {
  /** --quick: CI's smoke run, one run each and shorter; not for comparison. */
  readonly quick: boolean;
  /** Runs a figure is the median of. */
  readonly runs: number;
  /** Seconds a throughput run lasts. */
  readonly seconds: number;
  /** The redis-server of the benchmark's own. */
  readonly server: RedisServer;
  /** A new client of `server`. */
  client(): Redis;
  /** One line of the Markdown report. */
  out(line?: string): void;
  /** A target: `value` at least `wanted` (a ratio, a rate), or at most it with `atMost` (a latency, a size). */
  target(name: string, value: number, wanted: number, atMost?: boolean): void;
  /** What bench-results.json holds, by section. */
  readonly results: Record<string, unknown>;
  readonly targets: readonly Target[];
}

export function createBench(options: { quick: boolean; server: RedisServer }): Bench {
  const { quick, server } = options;
  const targets: Target[] = [];
  return {
    quick,
    runs: quick ? 1 : 3,
    seconds: quick ? 1 : 4,
    server,
    client: () => new Redis(server.url, { maxRetriesPerRequest: 1 }),
    out: (line = '') => void process.stdout.write(`${line}\n`),
    target: (name, value, wanted, atMost = false) =>
      void targets.push({ name, value, target: wanted, atMost, met: atMost ? value <= wanted : value >= wanted }),
    results: {},
    targets,
  };
}
