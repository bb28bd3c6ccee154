import { describe, expect, it } from 'vitest';
import { spawnJobId, spawnJobSchema } from './job.js';

describe('spawn queue', () => {
  it('derives one job id per user and fence, free of the colons BullMQ refuses', () => {
    expect(spawnJobId('a:b', 3)).toBe(spawnJobId('a:b', 3));
    expect(spawnJobId('a:b', 3)).not.toBe(spawnJobId('a:b', 4));
    expect(spawnJobId('a:b', 3)).not.toContain(':');
  });

  it('refuses a payload with unknown fields', () => {
    expect(spawnJobSchema.safeParse({ userId: 'a', sessionId: crypto.randomUUID(), fence: 1, extra: 1 }).success).toBe(
      false,
    );
  });
});
