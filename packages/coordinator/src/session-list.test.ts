import { cleanUp, commandsDuring, totalCalls, until } from '@cq/test-harness';
import { describe, expect, it } from 'vitest';
import type { Coordinator } from './coordinator.js';
import { sessionIdInSlot, slotOfSessionId, type ListPosition, type SessionFilter } from './session-list.js';
import type { AdmitOutcome, Claim, SessionView } from './session-types.js';
import { slotOf } from './slots.js';
import { connectionPool, coordinatorsOn, testCoordinator } from './test-support/setup.js';

const worker = { workerId: 'host-a', leaseMs: 30_000, graceMs: 1000 };
const policy = { tokenLimit: 100_000, spawnIntervalMs: 1, spawnBurst: 1000 };

async function admit(
  c: Coordinator,
  userId: string,
  options: Parameters<Coordinator['tokens']['issue']>[1] = {},
): Promise<Extract<AdmitOutcome, { outcome: 'admitted' }>> {
  const issued = await c.tokens.issue(userId, options);
  if (issued.outcome !== 'issued') throw new Error(`no token for ${userId}`);
  const admitted = await c.sessions.admit(issued.token);
  if (admitted.outcome !== 'admitted') throw new Error(`${userId} not admitted: ${admitted.outcome}`);
  return admitted;
}

async function run(c: Coordinator, userId: string, workerId = 'host-a'): Promise<Claim> {
  const claimed = await c.claims.claim(await admit(c, userId), { ...worker, workerId });
  if (!claimed.claimed) throw new Error(`${userId} not claimed`);
  return claimed.claim;
}

/** Every session of a walk, page after page of `limit`, from the start to the end. */
async function walk(
  c: Coordinator,
  filter: SessionFilter = {},
  limit = 7,
  between: () => Promise<void> = async () => {},
): Promise<{ seen: SessionView[]; pages: number }> {
  const seen: SessionView[] = [];
  let from: ListPosition | undefined;
  let pages = 0;
  for (;;) {
    const page = await c.sessions.list(filter, { limit, ...(from === undefined ? {} : { from }) });
    pages++;
    expect(page.sessions.length).toBeLessThanOrEqual(limit);
    seen.push(...page.sessions);
    if (page.next === undefined) return { seen, pages };
    from = page.next;
    await between();
  }
}

describe('session ids', () => {
  it('carry the slot of their user: a UUID, version 4, whose last four hex digits give the slot back', () => {
    for (const slot of [0, 1, 255, 256, 8191, 16383]) {
      const id = sessionIdInSlot(slot);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(slotOfSessionId(id)).toBe(slot);
    }
    expect(new Set(Array.from({ length: 100 }, () => sessionIdInSlot(7))).size).toBe(100);
  });
});

describe('labels', () => {
  const c = testCoordinator({ policy });

  it('go from the token to the session, its events, its history entry and its claim (SESSION_LABELS)', async () => {
    const claim = await run(c, 'lab-1');
    expect(claim.labels).toEqual({});
    await c.claims.finish(claim, 'completed', 0);
    const admitted = await admit(c, 'lab-1', { labels: { job: 'j-1', 'team.io/owner': 'ann' }, pool: 'gpu-a' });
    expect(await c.sessions.settleAndRead('lab-1')).toMatchObject({
      sessionId: admitted.sessionId,
      labels: { job: 'j-1', 'team.io/owner': 'ann' },
      pool: 'gpu-a',
    });
    // A host of another pool does not claim it; one of its pool does.
    expect(await c.claims.claim(admitted, worker)).toEqual({ claimed: false, reason: 'wrong_pool', pool: 'gpu-a' });
    const claimed = await c.claims.claim(admitted, { ...worker, pool: 'gpu-a' });
    if (!claimed.claimed) throw new Error('not claimed');
    expect(claimed.claim).toMatchObject({ labels: { job: 'j-1', 'team.io/owner': 'ann' }, pool: 'gpu-a' });
    await c.claims.finish(claimed.claim, 'completed', 0);
    const [entry] = await c.sessions.history('lab-1');
    expect(entry).toMatchObject({ sessionId: admitted.sessionId, labels: { job: 'j-1', 'team.io/owner': 'ann' } });
    expect(entry!.pool).toBe('gpu-a');
    const events = await c.redis.xrange(c.keys.user('lab-1').events, '-', '+');
    const mine = events
      .map(([, fields]) => JSON.parse(fields[1]!) as Record<string, unknown>)
      .filter((e) => e['sessionId'] === admitted.sessionId);
    expect(mine.map((e) => e['type'])).toEqual(['pending', 'running', 'completed']);
    for (const event of mine)
      expect(event).toMatchObject({ labels: { job: 'j-1', 'team.io/owner': 'ann' }, pool: 'gpu-a' });
  });

  it('change while the session is live: merged, null removes a key, at most 16 after the merge (nothing changes beyond)', async () => {
    await admit(c, 'lab-2', { labels: { a: '1', b: '2' } });
    expect(await c.sessions.update('lab-2', { labels: { b: null, c: '3' } })).toMatchObject({
      outcome: 'changed',
      session: { labels: { a: '1', c: '3' } },
    });
    const many = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, 'v']));
    expect(await c.sessions.update('lab-2', { labels: many })).toEqual({ outcome: 'too_many_labels', count: 17 });
    expect((await c.sessions.settleAndRead('lab-2'))!.labels).toEqual({ a: '1', c: '3' });
    // Labels and lifetime in one change, all or nothing.
    expect(await c.sessions.update('lab-2', { labels: { a: null }, lifetimeMs: 5000 })).toMatchObject({
      outcome: 'changed',
      session: { labels: { c: '3' }, lifetimeMs: 5000 },
    });
    await c.sessions.requestStop('lab-2');
    expect(await c.sessions.update('lab-2', { labels: { d: '4' } })).toEqual({ outcome: 'no_session' });
  });

  it('are refused at issue when they break a limit, naming the label', async () => {
    await expect(c.tokens.issue('lab-3', { labels: { 'bad key': 'x' } })).rejects.toThrow(/label key "bad key"/);
    await expect(c.tokens.issue('lab-3', { labels: { k: 'x'.repeat(129) } })).rejects.toThrow(
      /label k has a value of 129/,
    );
    await expect(c.tokens.issue('lab-3', { labels: { k: 'a\u0007b' } })).rejects.toThrow(/label k has a control/);
    const seventeen = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    await expect(c.tokens.issue('lab-3', { labels: seventeen })).rejects.toThrow(/17 labels; at most 16/);
  });
});

describe('the session list', () => {
  it('walks every live session once, in pages, with each filter; a session by id, live or ended', async () => {
    const c = testCoordinator({ policy });
    const claims: Claim[] = [];
    for (let i = 0; i < 12; i++) claims.push(await run(c, `walk-${i}`, i % 2 === 0 ? 'host-a' : 'host-b'));
    for (let i = 0; i < 5; i++) await admit(c, `wait-${i}`, { labels: { job: 'j-9' }, pool: 'cpu' });
    const { seen } = await walk(c);
    expect(seen.map((s) => s.userId).sort()).toEqual(
      [
        ...Array.from({ length: 12 }, (_, i) => `walk-${i}`),
        ...Array.from({ length: 5 }, (_, i) => `wait-${i}`),
      ].sort(),
    );
    expect((await walk(c, { state: 'pending' })).seen.map((s) => s.userId).sort()).toEqual(
      Array.from({ length: 5 }, (_, i) => `wait-${i}`).sort(),
    );
    expect((await walk(c, { workerId: 'host-b' })).seen).toHaveLength(6);
    expect((await walk(c, { pool: 'cpu', labels: { job: 'j-9' } })).seen).toHaveLength(5);
    expect((await walk(c, { labels: { job: 'other' } })).seen).toHaveLength(0);
    expect((await walk(c, { userId: 'walk-3' })).seen.map((s) => s.sessionId)).toEqual([claims[3]!.sessionId]);

    expect(await c.sessions.byId(claims[0]!.sessionId)).toMatchObject({ live: true, session: { userId: 'walk-0' } });
    await c.claims.finish(claims[0]!, 'completed', 0);
    expect(await c.sessions.byId(claims[0]!.sessionId)).toMatchObject({
      live: false,
      userId: 'walk-0',
      entry: { sessionId: claims[0]!.sessionId, state: 'completed' },
    });
    expect(await c.sessions.byId(sessionIdInSlot(12))).toBeUndefined();
  });

  it('a page reads the slots it lists, not 16384: its Redis commands grow with its limit, not with the sessions', async () => {
    const c = testCoordinator({ policy });
    for (let i = 0; i < 300; i++) await admit(c, `many-${i}`);
    const first = await commandsDuring(c.redis as never, () => c.sessions.list({}, { limit: 7 }));
    const larger = await commandsDuring(c.redis as never, () => c.sessions.list({}, { limit: 70 }));
    // 7 sessions: the directory (1), at most a batch of slots (2 each), 7 reads (and their script calls inside).
    expect(totalCalls(first)).toBeLessThan(7 * 8 + 2 * 64 + 4);
    expect(totalCalls(larger)).toBeGreaterThan(totalCalls(first));
  });

  it('a slot whose sessions all ended leaves the directory at the next walk, and its next session enters it again', async () => {
    const c = testCoordinator({ policy });
    const claim = await run(c, 'lonely');
    const slot = slotOf(c.keys.user('lonely').session);
    const directory = c.keys.directory().slots;
    expect(await c.redis.zscore(directory, String(slot))).toBe(String(slot));
    await c.claims.finish(claim, 'completed', 0);
    await walk(c);
    expect(await c.redis.zscore(directory, String(slot))).toBeNull();
    expect(await c.redis.exists(c.keys.listed(slot))).toBe(0);
    const again = await admit(c, 'lonely');
    expect(await c.redis.zscore(directory, String(slot))).toBe(String(slot));
    expect((await walk(c)).seen.map((s) => s.sessionId)).toEqual([again.sessionId]);
  });

  it('a slot with a live session is in the directory whatever walkers unlist at the same moment (real concurrency)', async () => {
    const c = testCoordinator({ policy });
    const others = coordinatorsOn(connectionPool(6), c);
    const directory = c.keys.directory().slots;
    for (let round = 0; round < 60; round++) {
      const user = `race-${round % 3}`;
      const slot = slotOf(c.keys.user(user).session);
      const live = await c.sessions.settleAndRead(user);
      if (live !== undefined) await c.sessions.requestStop(user);
      // Walkers on six connections find the slot empty and unlist it while the admission enters it.
      const [admitted] = await Promise.all([admit(c, user), ...others.map((o) => o.sessions.list({}, { limit: 50 }))]);
      expect(await c.sessions.settleAndRead(user)).toMatchObject({ sessionId: admitted.sessionId });
      expect(await c.redis.zscore(directory, String(slot)), `round ${round}`).toBe(String(slot));
      expect((await walk(c, { userId: user })).seen).toHaveLength(1);
      expect(
        (await walk(c)).seen.some((s) => s.sessionId === admitted.sessionId),
        `round ${round}`,
      ).toBe(true);
    }
  });

  it('pages of 7 while sessions start and end under the walk: each session live for the whole walk exactly once', async () => {
    const c = testCoordinator({ policy });
    const stayers: string[] = [];
    for (let i = 0; i < 40; i++) stayers.push((await admit(c, `stay-${i}`)).sessionId);
    let churn = 0;
    const comers: Claim[] = [];
    // Between pages: two sessions start, one of the earlier newcomers ends.
    const between = async (): Promise<void> => {
      comers.push(await run(c, `come-${churn++}`), await run(c, `come-${churn++}`));
      const leaving = comers.shift();
      if (leaving !== undefined) await c.claims.finish(leaving, 'completed', 0);
    };
    const { seen, pages } = await walk(c, {}, 7, between);
    expect(pages).toBeGreaterThan(5);
    const ids = seen.map((s) => s.sessionId);
    expect(new Set(ids).size, 'no session twice').toBe(ids.length);
    for (const id of stayers)
      expect(
        ids.filter((x) => x === id),
        id,
      ).toHaveLength(1);
  });
});

describe('stopping what a filter matches', () => {
  it('stops every live matching session as DELETE does, at most max per call, and says when more may match', async () => {
    const c = testCoordinator({ policy });
    for (let i = 0; i < 6; i++) await run(c, `bulk-${i}`);
    for (let i = 0; i < 4; i++) await admit(c, `bulk-p-${i}`, { labels: { job: 'x' } });
    for (let i = 0; i < 3; i++) await admit(c, `keep-${i}`, { labels: { job: 'y' } });
    const first = await c.sessions.stopMatching({ labels: { job: 'x' } }, { max: 3 });
    expect(first).toMatchObject({ matched: 3, stopping: 3, more: true });
    const second = await c.sessions.stopMatching({ labels: { job: 'x' } });
    expect(second).toMatchObject({ matched: 1, stopping: 1, more: false });
    // Pending ones ended at once as stopped; the others untouched.
    for (let i = 0; i < 4; i++) expect(await c.sessions.settleAndRead(`bulk-p-${i}`)).toBeUndefined();
    for (let i = 0; i < 3; i++) expect(await c.sessions.settleAndRead(`keep-${i}`)).toMatchObject({ state: 'pending' });
    expect(await c.sessions.stopMatching({ state: 'running' })).toEqual({
      matched: 6,
      stopping: 6,
      more: false,
    });
    for (let i = 0; i < 6; i++)
      expect(await c.sessions.settleAndRead(`bulk-${i}`)).toMatchObject({ state: 'stopping' });
  });
});

describe('an upgrade', () => {
  it("enters the slots of sessions admitted before the list existed at the sweeper's full read", async () => {
    const c = testCoordinator({ policy });
    await admit(c, 'before-list');
    const slot = slotOf(c.keys.user('before-list').session);
    // As a deployment from before the list has it: no directory entry, no `listed` key.
    await c.redis.del(c.keys.directory().slots, c.keys.directory().generations, c.keys.listed(slot));
    expect((await walk(c)).seen).toEqual([]);
    const sweeper = c.sweeper({ intervalMs: 50 });
    cleanUp(() => sweeper.stop());
    sweeper.start();
    await until(() => sweeper.fullScans >= 1, 10_000, "the sweeper's full read");
    await until(async () => (await c.redis.exists(c.keys.listed(slot))) === 1, 10_000, 'the slot entered');
    expect((await walk(c)).seen.map((s) => s.userId)).toEqual(['before-list']);
  });
});
