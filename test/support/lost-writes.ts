import { expect } from 'vitest';
import { alive, sessionPids, until } from './processes.js';
import type { System } from './system.js';

/** What `POST /v1/spawn` answered: status, fence or error, and Retry-After (seconds) when there is one. */
export interface SpawnAnswer {
  status: number;
  fence?: number;
  error?: { code: string; message: string };
  retryAfter?: number;
}

/** `POST /v1/spawn` with `token`, any answer (a refusal is not thrown). */
export async function spawnAnswer(system: System, token: string): Promise<SpawnAnswer> {
  const res = await fetch(`${system.api.baseUrl}/v1/spawn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  const body = (await res.json()) as { fence?: number; error?: { code: string; message: string } };
  const retryAfter = res.headers.get('retry-after');
  return { status: res.status, ...body, ...(retryAfter === null ? {} : { retryAfter: Number(retryAfter) }) };
}

/**
 * After Redis lost the writes that admitted `lost` and each user was admitted again (`admitted`), judged
 * from outside: the spent tokens do not admit; by the sessions' own heartbeats each old session had
 * stopped before the new one began, and none of its processes is left; fences rose; each lost session
 * reached exactly one terminal state, lost / state_lost.
 */
export async function expectNoOverlapAfterLoss(
  system: System,
  users: readonly string[],
  spent: ReadonlyMap<string, string>,
  lost: ReadonlyMap<string, { sessionId: string; fence: number }>,
  admitted: ReadonlyMap<string, { fence: number }>,
  leaseMs: number,
): Promise<void> {
  // (409 now that the user has a live session again: the token is checked after the live session.)
  for (const userId of users) expect([403, 409]).toContain((await spawnAnswer(system, spent.get(userId)!)).status);
  await until(
    () => users.every((u) => system.observed().some((o) => o.userId === u && o.fence === admitted.get(u)!.fence)),
    15_000,
    'every new session running',
  );
  const seen = system.observed();
  for (const userId of users) {
    const old = lost.get(userId)!;
    const now = admitted.get(userId)!;
    // Fences rise across the loss, in the API's answer and in FENCE as the session saw it.
    expect(now.fence).toBeGreaterThan(old.fence);
    const oldBeats = seen.filter((o) => o.userId === userId && o.fence === old.fence).map((o) => o.at);
    const newBeats = seen.filter((o) => o.userId === userId && o.fence === now.fence).map((o) => o.at);
    expect(Math.max(...oldBeats)).toBeLessThan(Math.min(...newBeats));
    expect(sessionPids(userId, old.fence).filter(alive)).toEqual([]);
    await until(
      async () => (await system.client.history(userId)).some((h) => h.sessionId === old.sessionId),
      leaseMs + 5000,
      'the lost session in history',
    );
    expect((await system.client.history(userId)).filter((h) => h.sessionId === old.sessionId)).toEqual([
      expect.objectContaining({ state: 'lost', reason: 'state_lost', fence: old.fence }),
    ]);
  }
}
