import type { Redis } from 'ioredis';

/** How many hash slots a Redis Cluster has. */
export const SLOTS = 16384;

/** One slot range of CLUSTER SLOTS and the port of its master. */
export interface SlotRange {
  readonly from: number;
  readonly to: number;
  readonly masterPort: number;
}

export async function clusterSlots(redis: Redis): Promise<SlotRange[]> {
  const reply = (await redis.call('CLUSTER', 'SLOTS')) as [
    number,
    number,
    [string, number, ...unknown[]],
    ...unknown[],
  ][];
  return reply
    .map(([from, to, master]) => ({ from, to, masterPort: Number(master[1]) }))
    .sort((a, b) => a.from - b.from);
}

/** "0-5460:p1 5461-10922:p2 ...", or what is missing; comparable between nodes. */
export function describeSlots(ranges: readonly SlotRange[]): string {
  return ranges.map((r) => `${r.from}-${r.to}:${r.masterPort}`).join(' ') || 'no slots';
}

export function coversAllSlots(ranges: readonly SlotRange[]): boolean {
  let next = 0;
  for (const r of ranges) {
    if (r.from !== next) return false;
    next = r.to + 1;
  }
  return next === SLOTS;
}
