import type { Admission } from '@cq/client';
import { until } from './processes.js';
import type { System } from './system.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What {@link spawnAgainAndAgain} saw. */
export interface LoadResult {
  /** Every admission, with the wall-clock time the API answered it. */
  admitted: Array<Admission & { at: number }>;
  /** Per admitted session: ms from asking until it ran (its first beat) or ended without running. */
  blocked: number[];
  /** Sessions that did not reach a terminal state in time. */
  unended: string[];
  /**
   * Sessions that are gone without a terminal state: neither live nor in the history. `answered`: the API
   * answered this admission with 202, so only a write lost in a failover explains it. Otherwise the
   * session was only found (after a 503, the retry met 403/409 and the user's live session was this one):
   * the API had answered 503 for it and rolls such an admission back once Redis answers again.
   */
  vanished: Array<{ userId: string; sessionId: string; admittedAt: number; answered: boolean }>;
  /** Requests the API refused or could not answer (retried), by HTTP status or error name. */
  refused: Map<string, number>;
  /** The longest time the API took to refuse a request, ms. */
  slowestRefusalMs: number;
}

/**
 * Each user, until `stopAt` (performance.now()), asks for a token, spawns (retrying every 50 ms on a
 * refusal that may pass: 503, 429), and waits until that session has ended before asking again. Sessions run
 * test/support/session.mjs for 200–1500 ms.
 */
export async function spawnAgainAndAgain(
  system: System,
  users: readonly string[],
  stopAt: number,
  endWithinMs: number,
): Promise<LoadResult> {
  const result: LoadResult = {
    admitted: [],
    blocked: [],
    unended: [],
    vanished: [],
    refused: new Map(),
    slowestRefusalMs: 0,
  };
  const refused = (err: unknown): void => {
    const key = String((err as { status?: number }).status ?? (err as Error).name);
    result.refused.set(key, (result.refused.get(key) ?? 0) + 1);
  };
  /** Calls until it succeeds; undefined when `final` says a refusal will not change by retrying. */
  const retrying = async <T>(
    call: () => Promise<T>,
    final: (err: unknown) => boolean = () => false,
  ): Promise<T | undefined> => {
    for (;;) {
      const sent = performance.now();
      try {
        return await call();
      } catch (err) {
        result.slowestRefusalMs = Math.max(result.slowestRefusalMs, performance.now() - sent);
        refused(err);
        if (final(err)) return undefined;
        await sleep(50);
      }
    }
  };
  // 403: the token was used; 409: the user has a live session. Either way an earlier try of this
  // spawn went through although its answer was lost (a 503 during a failover): follow that session.
  const spent = (err: unknown): boolean => [403, 409].includes((err as { status?: number }).status ?? 0);
  const user = async (userId: string): Promise<void> => {
    while (performance.now() < stopAt) {
      const { token } = (await retrying(() =>
        system.client.issueToken({ userId, metadata: { durationMs: 200 + Math.floor(Math.random() * 1300) } }),
      ))!;
      const asked = performance.now();
      let admission: Admission | undefined = await retrying(() => system.client.spawn(token), spent);
      const answered = admission !== undefined;
      if (admission === undefined) {
        const live = await retrying(() => system.client.findSession(userId));
        if (live === undefined) continue;
        admission = { sessionId: live.sessionId, userId, fence: live.fence, state: 'pending', lifetimeMs: 0 };
      }
      const admittedAt = Date.now();
      const { sessionId, fence } = admission;
      result.admitted.push({ ...admission, at: admittedAt });
      let waited: number | undefined;
      let vanished = false;
      try {
        await until(
          async () => {
            if (waited === undefined && system.observed().some((o) => o.userId === userId && o.fence === fence))
              waited = performance.now() - asked;
            try {
              // Live first, then the history: an ending moves a session from one to the other atomically,
              // so a session in neither was lost, not caught in between.
              const live = (await system.client.findSession(userId))?.sessionId === sessionId;
              if ((await system.client.history(userId)).some((h) => h.sessionId === sessionId)) return true;
              vanished = !live;
              return vanished;
            } catch (err) {
              refused(err);
              return false;
            }
          },
          endWithinMs,
          'ended',
        );
      } catch {
        result.unended.push(sessionId);
        return;
      }
      if (vanished) {
        result.vanished.push({ userId, sessionId, admittedAt, answered });
        continue;
      }
      result.blocked.push(waited ?? performance.now() - asked);
    }
  };
  await Promise.all(users.map(user));
  return result;
}

/**
 * Overlaps between sessions of one user, from the observer file: each session process wrote "user
 * fence time pid" every 50 ms; per user, the lifetimes (first to last beat) must never overlap, and
 * fences must grow in the order the sessions ran.
 */
export function overlapsIn(observed: ReturnType<System['observed']>): {
  overlaps: string[];
  users: number;
  longestGapMs: number;
} {
  const spans = new Map<string, Map<number, { first: number; last: number }>>();
  for (const beat of observed) {
    const perUser = spans.get(beat.userId) ?? new Map<number, { first: number; last: number }>();
    spans.set(beat.userId, perUser);
    const span = perUser.get(beat.fence) ?? { first: beat.at, last: beat.at };
    span.first = Math.min(span.first, beat.at);
    span.last = Math.max(span.last, beat.at);
    perUser.set(beat.fence, span);
  }
  const overlaps: string[] = [];
  let longestGapMs = 0;
  for (const [userId, perUser] of spans) {
    const ordered = [...perUser.entries()].sort((a, b) => a[1].first - b[1].first);
    for (let i = 1; i < ordered.length; i++) {
      const [prevFence, prev] = ordered[i - 1]!;
      const [fence, span] = ordered[i]!;
      if (span.first <= prev.last)
        overlaps.push(
          `${userId}: fence ${fence} started at ${span.first} while fence ${prevFence} lived until ${prev.last}`,
        );
      if (fence < prevFence) overlaps.push(`${userId}: fence ${fence} ran after fence ${prevFence}`);
      longestGapMs = Math.max(longestGapMs, span.first - prev.last);
    }
  }
  return { overlaps, users: spans.size, longestGapMs };
}
