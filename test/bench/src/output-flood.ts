// A session flooding its output, and what its neighbours on the same worker host feel of it (built API
// and host, real sessions): how long a spawn takes to have its session running, before the flood and
// during it, and how long a neighbour's lines take from its print to Redis during it. Reported, not
// asserted (test/e2e/output-bounds.test.ts asserts what must hold: every neighbour line arrives, in order).
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Stack, visibleCopy } from './sessions.js';

/** The test session, by its full path: a session's current directory is its own SESSION_DIR. */
const SESSION = fileURLToPath(new URL('../../support/session.mjs', import.meta.url));

export interface OutputFloodBench {
  floodBytes: number;
  /** Spawn (POST) → the session's process running (its first line of shell), ms. */
  spawnQuietMs: number;
  spawnDuringFloodMs: number;
  /** A neighbour's lines during the flood, print → in Redis (the line id's time), ms. */
  neighbour: { lines: number; p50: number; p99: number; max: number };
  containment: string;
}

interface Page {
  lines: Array<{ id: string; at: string; line: string }>;
  more: boolean;
}

function percentiles(values: number[]): { p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

export async function benchOutputFlood(redisUrl: string, quick: boolean): Promise<OutputFloodBench> {
  const floodBytes = quick ? 20_000_000 : 100_000_000;
  const stack = new Stack(redisUrl, 'benchflood', `exec "${process.execPath}" "${visibleCopy(SESSION)}"`);
  try {
    await stack.startApi();
    const { containment } = await stack.addHost('flood-1', 4, { LOG_KEEP_LINES: '2000' });
    const spawn = async (userId: string, metadata: Record<string, unknown>): Promise<string> => {
      const { token } = (await stack.post('/v1/tokens', { userId, metadata })) as { token: string };
      return String((await stack.post('/v1/spawn', { token }, false))['sessionId']);
    };
    /** Spawn → running, ms (the session writes the epoch ms it started at: see Stack.command). */
    const spawnToRunning = async (userId: string): Promise<number> => {
      const postedAt = performance.timeOrigin + performance.now();
      await spawn(userId, { durationMs: 100 });
      return (await stack.waitStarted([userId])).get(userId)! - postedAt;
    };
    const neighbourId = await spawn('flood-neighbour', { tickEveryMs: 100 });
    const spawnQuietMs = await spawnToRunning('flood-probe-quiet');
    const floodId = await spawn('flood-loud', { floodBytes });
    const spawnDuringFloodMs = await spawnToRunning('flood-probe-loud');
    const logs = async (userId: string, sessionId: string, after?: string): Promise<Page> =>
      (await stack.get(
        `/v1/users/${userId}/sessions/${sessionId}/logs${after === undefined ? '' : `?after=${after}`}`,
      )) as unknown as Page;
    // The flood is through once nearly all of it is counted as dropped.
    for (;;) {
      const page = (await stack.get(`/v1/users/flood-loud/sessions/${floodId}/logs?limit=1`)) as {
        droppedBytes: number;
      };
      if (page.droppedBytes > floodBytes * 0.9) break;
      await sleep(200);
    }
    const delays: number[] = [];
    for (let page = await logs('flood-neighbour', neighbourId); ;) {
      for (const { at, line } of page.lines)
        if (line.startsWith('tick')) delays.push(Date.parse(at) - Number(line.split(' ')[2]));
      if (!page.more) break;
      page = await logs('flood-neighbour', neighbourId, page.lines.at(-1)!.id);
    }
    return {
      floodBytes,
      spawnQuietMs,
      spawnDuringFloodMs,
      neighbour: { lines: delays.length, ...percentiles(delays) },
      containment,
    };
  } finally {
    await stack.stop();
  }
}
