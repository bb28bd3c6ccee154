import { describe, expect, inject, it } from 'vitest';
import { ROOT, startNode } from '../support/processes.js';

describe('a Redis Cluster set up to lose writes', () => {
  it('stops the API and a worker host at start, with one line naming every node found (here: none keeps anything on disk)', async () => {
    const seeds = inject('redisClusterNodes');
    const common = { REDIS_CLUSTER_NODES: seeds, SPAWN_QUEUE_SHARDS: '3', REDIS_ACCEPT_RISKS: '' };
    const processes = [
      startNode(`${ROOT}apps/api/dist/main.js`, { ...common, API_KEYS: 'cluster-setup-key-0123456789', PORT: '0' }),
      startNode(`${ROOT}apps/worker/dist/main.js`, {
        ...common,
        WORKER_ID: 'cluster-setup-host',
        SESSION_CONTAINMENT: 'group',
        SESSION_NETWORK: 'host',
      }),
    ];
    for (const started of processes) {
      const { code } = await started.exited();
      const lines = started.stderr
        .join('')
        .split('\n')
        .filter((l) => l !== '');
      expect(code, lines.join('\n')).toBe(1);
      expect(lines).toHaveLength(1);
      const [line] = lines;
      // Every node the client found, in one finding (the harness's nodes have neither AOF nor save points):
      // its 3 masters (CLUSTER SLOTS lists no replica of this harness, so neither does ioredis's pool).
      const named = /^Redis 7\.\d+\.\d+ at ((?:127\.0\.0\.1:\d+(?:, )?)+) keeps nothing on disk/.exec(line!);
      expect(named, line).not.toBeNull();
      expect(named![1]!.split(', ')).toHaveLength(3);
      expect(line).toMatch(/\(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=no-persistence\)$/);
    }
  });
});
