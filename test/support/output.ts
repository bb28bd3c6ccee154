// Helpers of the session output tests: spawning a test session with metadata, reading a session's
// whole kept output, percentiles.
import type { CoordinatorClient, OutputLineData } from '@cq/client';
import type { System } from './system.js';

/** Spawns a test session (test/support/session.mjs) for `userId` with `metadata`. */
export const spawnWith = async (system: System, userId: string, metadata: Record<string, unknown>) =>
  system.client.spawn((await system.client.issueToken({ userId, metadata })).token);

/** Every kept line of a session, page by page. */
export async function allLines(
  client: CoordinatorClient,
  userId: string,
  sessionId: string,
): Promise<OutputLineData[]> {
  const lines: OutputLineData[] = [];
  for (let page = await client.logs(userId, sessionId); ;) {
    lines.push(...page.lines);
    if (!page.more) return lines;
    page = await client.logs(userId, sessionId, { after: page.lines.at(-1)!.id });
  }
}

/** The `p`th percentile of sorted numbers. */
export const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
