import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startRedisServer, type RedisServer } from '@cq/test-harness';

const run = promisify(execFile);

/** A redis-server of the benchmark's own: no persistence, DEBUG allowed locally (for POPULATE). */
export function benchRedis(): Promise<RedisServer> {
  return startRedisServer({ args: ['--enable-debug-command', 'local', '--maxmemory-policy', 'noeviction'] });
}

/** `redis-benchmark` running one command at `clients` concurrency: requests per second and p50/p99 ms. */
export async function redisBenchmark(
  port: number,
  clients: number,
  requests: number,
  command: string[],
): Promise<{ rps: number; p50: number; p99: number }> {
  const { stdout } = await run(
    'redis-benchmark',
    [
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-c',
      String(clients),
      '-n',
      String(requests),
      '-r',
      '100000',
      '--csv',
      ...command,
    ],
    {
      maxBuffer: 1 << 20,
    },
  );
  const lines = stdout.trim().split('\n');
  const header = lines[0]!.split(',').map((c) => c.replace(/"/g, ''));
  const values = lines[lines.length - 1]!.split(',').map((c) => c.replace(/"/g, ''));
  const field = (name: string): number => Number(values[header.indexOf(name)]);
  return { rps: field('rps'), p50: field('p50_latency_ms'), p99: field('p99_latency_ms') };
}
