import { describe, expect, it } from 'vitest';
import { API_KEY, startSystem } from '../support/system.js';
import { startApi, until } from '../support/processes.js';
import { targetEnv } from '../support/target.js';
import { CoordinatorClient } from '@cq/client';

/** One raw spawn: status, Retry-After and body, as a client sees them. */
async function spawnRaw(
  baseUrl: string,
  token: string,
): Promise<{ status: number; retryAfter: string | null; body: { sessionId?: string; error?: { code: string } } }> {
  const res = await fetch(`${baseUrl}/v1/spawn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as never };
}

describe('capacity-aware admission', () => {
  it('2 hosts × 2 slots, 20 users at once: exactly 4 admitted and running, 16 × 503 no_capacity with Retry-After; a refused token works once a slot frees; nothing ends lost', async () => {
    const system = await startSystem({ workers: 2, workerEnv: { SLOTS: '2' } });
    const users = Array.from({ length: 20 }, (_, i) => `cap-${i}`);
    const tokens = await Promise.all(
      users.map(async (userId) => (await system.client.issueToken({ userId, metadata: {} })).token),
    );
    const answers = await Promise.all(tokens.map((token) => spawnRaw(system.api.baseUrl, token)));
    const admitted = users.filter((_, i) => answers[i]!.status === 202);
    const refused = answers.filter((a) => a.status === 503);
    expect(admitted).toHaveLength(4);
    expect(refused).toHaveLength(16);
    for (const answer of refused) {
      expect(answer.body.error?.code).toBe('no_capacity');
      expect(answer.retryAfter).toBe('1');
    }
    // All four run (two on each host), and none of them waits for a slot.
    await until(
      async () =>
        (await Promise.all(admitted.map((u) => system.client.findSession(u)))).every((s) => s?.state === 'running'),
      10_000,
      'the four admitted sessions running',
    );
    expect((await system.client.hosts()).freeSlots).toBe(0);
    // Each host reports its busy slots with the heartbeat that follows a claim.
    const listed = async () =>
      (await system.client.hosts()).hosts.map((h) => [h.workerId, h.state, h.busy, h.slots].join(' '));
    await until(
      async () => (await listed()).join(', ') === 'host-1 active 2 2, host-2 active 2 2',
      5000,
      'both hosts listed as busy',
    );

    // One session ends; its host gives the slot back with its next heartbeat, and a refused token (not
    // spent, its throttle not moved) is admitted with it.
    await system.client.stopSession(admitted[0]!);
    await until(async () => (await system.client.hosts()).freeSlots === 1, 10_000, 'a slot free again');
    const refusedIndex = answers.findIndex((a) => a.status === 503);
    const again = await spawnRaw(system.api.baseUrl, tokens[refusedIndex]!);
    expect(again.status).toBe(202);
    const late = users[refusedIndex]!;
    await until(async () => (await system.client.findSession(late))?.state === 'running', 10_000, 'it runs');

    for (const userId of [...admitted.slice(1), late]) await system.client.stopSession(userId);
    for (const userId of [...admitted, late]) {
      await until(async () => (await system.client.findSession(userId)) === undefined, 10_000, `${userId} ended`);
      const [last] = await system.client.history(userId);
      expect(last?.state).toBe('stopped');
    }
    await until(async () => (await system.client.hosts()).freeSlots === 4, 10_000, 'every slot free again');
    // Nobody waited as pending and ended lost: the refused never had a session at all.
    for (const userId of users)
      expect((await system.client.history(userId)).some((h) => h.state === 'lost')).toBe(false);
  });

  it('500 simultaneous spawns on 50 free slots: exactly 50 admitted, 5 times over; free slots return to 50 each time', async () => {
    const system = await startSystem({
      workers: 2,
      // The admission under real concurrency, not the API's load shedding (load-shedding.test.ts): a CI
      // run whose other lane loaded the machine saw 5 of the 500 answered 503 unavailable by it.
      apiEnv: { MAX_EVENT_LOOP_DELAY_MS: '0' },
      workerEnv: { SLOTS: '25', SESSION_COMMAND: 'exec sleep 600', SESSION_GRACE_MS: '500' },
    });
    expect((await system.client.hosts()).freeSlots).toBe(50);
    for (let round = 0; round < 5; round++) {
      const users = Array.from({ length: 500 }, (_, i) => `many-${round}-${i}`);
      const tokens = await Promise.all(users.map(async (userId) => (await system.client.issueToken({ userId })).token));
      const answers = await Promise.all(tokens.map((token) => spawnRaw(system.api.baseUrl, token)));
      const admitted = users.filter((_, i) => answers[i]!.status === 202);
      // The answers by status and code, so that a failure says what the others got.
      const got = answers.reduce<Record<string, number>>((n, a) => {
        const key = `${a.status} ${a.body.error?.code ?? ''}`.trim();
        return { ...n, [key]: (n[key] ?? 0) + 1 };
      }, {});
      expect(admitted, `round ${round}: ${JSON.stringify(got)}`).toHaveLength(50);
      expect(answers.filter((a) => a.status === 503 && a.body.error?.code === 'no_capacity')).toHaveLength(450);
      expect((await system.client.hosts()).freeSlots).toBe(0);
      await Promise.all(admitted.map((userId) => system.client.stopSession(userId)));
      await until(
        async () =>
          (await Promise.all(admitted.map((u) => system.client.findSession(u)))).every((s) => s === undefined),
        20_000,
        'every session of the round ended',
      );
      // No hold left behind: once the hosts' next heartbeats are in, all 50 slots are free again.
      await until(async () => (await system.client.hosts()).freeSlots === 50, 10_000, 'all 50 slots free again');
    }
  }, 120_000);

  it('an API SIGKILLed in the middle of admissions leaks no slot for longer than PENDING_TIMEOUT_MS + 5 s', async () => {
    const PENDING_TIMEOUT_MS = 2000;
    const bound = PENDING_TIMEOUT_MS + 5000;
    const apiEnv = { PENDING_TIMEOUT_MS: String(PENDING_TIMEOUT_MS) };
    const system = await startSystem({
      workers: 1,
      apiEnv,
      workerEnv: { SLOTS: '200', SESSION_COMMAND: 'exec sleep 600', SESSION_GRACE_MS: '500' },
    });
    const users = Array.from({ length: 400 }, (_, i) => `kill-${i}`);
    const tokens = await Promise.all(users.map(async (userId) => (await system.client.issueToken({ userId })).token));
    // Spawns arrive 40 at a time; the API is SIGKILLed once 60 have been answered.
    let answered = 0;
    const sending = (async () => {
      for (let i = 0; i < tokens.length; i += 40)
        await Promise.all(
          tokens.slice(i, i + 40).map((token) =>
            spawnRaw(system.api.baseUrl, token).then(
              () => answered++,
              () => {},
            ),
          ),
        );
    })();
    await until(async () => answered >= 60, 20_000, '60 spawns answered');
    const killedAt = performance.now();
    system.api.child.kill('SIGKILL');
    await sending;
    await system.api.exited();

    // Another API on the same Redis. A session admitted but never handed on ends lost at its pending
    // deadline (the sweep); the ones a host took run, and are stopped.
    const api = await startApi({
      ...targetEnv(system.target),
      KEY_PREFIX: system.keyPrefix,
      API_KEYS: API_KEY,
      ...apiEnv,
      SWEEP_INTERVAL_MS: '250',
    });
    const client = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: API_KEY });
    const sessions = async () =>
      (await Promise.all(users.map((u) => client.findSession(u)))).filter((s) => s !== undefined);
    await until(
      async () => (await sessions()).every((s) => s.state === 'running'),
      PENDING_TIMEOUT_MS + 5000,
      'no session pending any more',
    );
    const live = await sessions();
    await Promise.all(live.map((s) => client.stopSession(s.userId)));
    await until(
      async () => (await Promise.all(live.map((s) => client.findSession(s.userId)))).every((s) => s === undefined),
      20_000,
      'every admitted session ended',
    );
    const leaked = 200 - (await client.hosts()).freeSlots;
    await until(async () => (await client.hosts()).freeSlots === 200, bound + 2000, 'all 200 slots free again');
    const recoveredMs = performance.now() - killedAt;
    console.info(
      `API SIGKILL: ${answered} spawns answered before it, ${live.length} sessions live after it; ${leaked} slot(s) still held once they had ended; all free ${Math.round(recoveredMs)} ms after the SIGKILL (bound ${bound} ms + the host's heartbeat)`,
    );
    expect(recoveredMs).toBeLessThan(bound + 2000);
    await api.stop();
  }, 90_000);

  it("drain: the host's sessions run to completed, new spawns go elsewhere or get no_capacity, and it exits 0 after its last one; SIGTSTP drains too", async () => {
    const system = await startSystem({ workers: 1, workerEnv: { SLOTS: '2' } });
    const spawn = async (userId: string, durationMs?: number) =>
      system.client.spawn(
        (await system.client.issueToken({ userId, metadata: durationMs === undefined ? {} : { durationMs } })).token,
      );
    const first = [await spawn('dr-a', 5000), await spawn('dr-b', 5500)];
    await until(
      async () =>
        (await Promise.all(['dr-a', 'dr-b'].map((u) => system.client.findSession(u)))).every(
          (s) => s?.state === 'running' && s.workerId === 'host-1',
        ),
      10_000,
      'both sessions running on host-1',
    );
    await system.addWorker('host-2', { SLOTS: '1' });
    const draining = system.workers[0]!;
    const exited = draining.exited().then((exit) => ({ ...exit, at: Date.now() }));

    expect(await system.client.drainHost('host-1')).toMatchObject({ workerId: 'host-1', state: 'draining', busy: 2 });
    const listed = await system.client.hosts();
    expect(listed.hosts.map((h) => `${h.workerId} ${h.state}`)).toEqual(['host-1 draining', 'host-2 active']);
    expect(listed.freeSlots).toBe(1);
    // New work goes to the other host, and past its one slot there is no capacity.
    await spawn('dr-c');
    await until(
      async () => (await system.client.findSession('dr-c'))?.workerId === 'host-2',
      10_000,
      'dr-c running on host-2',
    );
    await expect(spawn('dr-d')).rejects.toMatchObject({
      code: 'no_capacity',
      retryAfterMs: 1000,
      pool: 'default',
      reason: 'pool_full',
    });

    // host-1's sessions end on their own, then it exits 0.
    const exit = await exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    for (const [i, userId] of ['dr-a', 'dr-b'].entries()) {
      const entry = (await system.client.history(userId)).find((h) => h.sessionId === first[i]!.sessionId);
      expect(entry).toMatchObject({ state: 'completed', workerId: 'host-1' });
      expect(exit.at).toBeGreaterThanOrEqual(Date.parse(entry!.endedAt));
    }
    expect(
      draining.logs.some(
        (l) => l['msg'] === 'draining: taking no new sessions; exiting once the running ones have ended',
      ),
    ).toBe(true);
    expect((await system.client.hosts()).hosts.map((h) => h.workerId)).toEqual(['host-2']);

    // SIGTSTP drains a host the same way (here an idle one: it exits at once).
    const third = await system.addWorker('host-3');
    third.child.kill('SIGTSTP');
    expect(await third.exited()).toMatchObject({ code: 0, signal: null });
    expect(third.logs.find((l) => String(l['msg']).startsWith('draining'))).toMatchObject({ reason: 'SIGTSTP' });
    await system.client.stopSession('dr-c');
  }, 60_000);
});
