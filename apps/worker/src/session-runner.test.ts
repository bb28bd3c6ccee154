import { setTimeout as sleep } from 'node:timers/promises';
import { Coordinator } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { isolatedRedis } from '@cq/test-harness';
import { describe, expect, inject, it, vi } from 'vitest';
import type { LaunchSpec, SessionExit, SessionHandle, SessionLauncher } from './session-process.js';
import { SessionRunner } from './session-runner.js';

/** The harness's lease, ms, and the margin the runner keeps below it (leaseMarginMs(3000)). */
const LEASE_MS = 3000;
const MARGIN_MS = 300;
/** Renewals come every third of the lease. */
const RENEW_EVERY_MS = LEASE_MS / 3;

/** An in-process session: ends when told to, recording how it was asked to stop, and when it was told what. */
class FakeSession implements SessionHandle {
  readonly calls: string[] = [];
  readonly renewals: number[] = [];
  /** `performance.now()` when each renewal reached the session. */
  readonly renewedAt: number[] = [];
  readonly deadlines: number[] = [];
  /** `performance.now()` when each deadline reached the session. */
  readonly deadlinesAt: number[] = [];
  /** `performance.now()` when it was told to stop. */
  stoppedAt: number | undefined;
  readonly exited: Promise<SessionExit>;
  /** `performance.now()` when it was launched. */
  readonly launchedAt = performance.now();
  #exit!: (exit: SessionExit) => void;
  constructor(readonly spec: LaunchSpec) {
    this.exited = new Promise((resolve) => (this.#exit = resolve));
  }
  finish(code: number, cause?: SessionExit['cause']): void {
    this.#exit({ exitCode: code, ...(cause === undefined ? {} : { cause }) });
  }
  leaseHolds(holdsUntil: number): void {
    this.renewals.push(holdsUntil);
    this.renewedAt.push(performance.now());
  }
  deadlineMoved(deadlineAt: number): void {
    this.deadlines.push(deadlineAt);
    this.deadlinesAt.push(performance.now());
  }
  terminate(): void {
    this.stoppedAt ??= performance.now();
    this.calls.push('terminate');
    this.#exit({ exitCode: 143 });
  }
  kill(): void {
    this.stoppedAt ??= performance.now();
    this.calls.push('kill');
    this.#exit({ exitCode: 137 });
  }
}

function harness() {
  const { redis, keyPrefix } = isolatedRedis(inject('redisUrl'));
  const coordinator = new Coordinator({
    redis,
    keyPrefix,
    policy: { tokenLimit: 1000, spawnIntervalMs: 1, spawnBurst: 1000 },
  });
  const sessions: FakeSession[] = [];
  const launcher: SessionLauncher = {
    launch: (spec) => {
      const session = new FakeSession(spec);
      sessions.push(session);
      return session;
    },
  };
  const runner = new SessionRunner({
    coordinator,
    launcher,
    workerId: 'unit-host',
    leaseMs: LEASE_MS,
    graceMs: 100,
    logger: createLogger({ level: 'silent', name: 'test' }),
  });
  const admit = async (userId: string, lifetimeMs?: number, idleTimeoutMs?: number) => {
    const issued = await coordinator.tokens.issue(userId, {
      ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
      ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    });
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const admitted = await coordinator.sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error(admitted.outcome);
    return admitted;
  };
  /** Waits (at most 5 s, then fails naming the wait) until `check` holds. */
  const until = (check: () => boolean) =>
    vi.waitFor(() => expect(check(), 'the awaited condition').toBe(true), { timeout: 5000, interval: 5 });
  return { coordinator, sessions, runner, admit, until };
}

describe('session runner', () => {
  const { coordinator, sessions, runner, admit, until } = harness();
  const noShutdown = new AbortController().signal;

  it('passes the contract environment and records completed / failed with the exit code', async () => {
    const a = await admit('runner-a', 60_000);
    const run = runner.run(a, noShutdown);
    await until(() => sessions.length === 1);
    const env = sessions[0]!.spec.sessionEnv;
    expect(env).toMatchObject({
      SESSION_ID: a.sessionId,
      USER_ID: 'runner-a',
      FENCE: String(a.fence),
      SESSION_METADATA: '{}',
    });
    expect(Number(env['DEADLINE'])).toBeGreaterThan(Date.now() + 55_000);
    sessions[0]!.finish(0);
    expect(await run).toEqual({ ran: true, state: 'completed', exitCode: 0, recorded: true });

    const b = await admit('runner-a');
    const failed = runner.run(b, noShutdown);
    await until(() => sessions.length === 2);
    sessions[1]!.finish(9);
    expect(await failed).toMatchObject({ state: 'failed', exitCode: 9 });
    expect((await coordinator.sessions.history('runner-a')).map((h) => h.state)).toEqual(['failed', 'completed']);
  });

  it('a job claimed twice runs once', async () => {
    const a = await admit('runner-twice');
    const first = runner.run(a, noShutdown);
    expect(await runner.run(a, noShutdown)).toEqual({ ran: false, reason: 'stale' });
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-twice'));
    sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-twice')!.finish(0);
    expect((await first).ran).toBe(true);
  });

  it('terminates at the lifetime cap (expired) and when the host shuts down (stopped)', async () => {
    const expiring = runner.run(await admit('runner-cap', 150), noShutdown);
    expect(await expiring).toMatchObject({ state: 'expired', exitCode: 143 });
    const shutdown = new AbortController();
    const stopping = runner.run(await admit('runner-shutdown', 60_000), shutdown.signal);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-shutdown'));
    shutdown.abort();
    expect(await stopping).toMatchObject({ state: 'stopped', exitCode: 143, recorded: true });
  });

  it('kills at once when the lease is lost', async () => {
    const a = await admit('runner-lost', 60_000);
    const run = runner.run(a, noShutdown);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-lost'));
    await coordinator.redis.del(coordinator.keys.user('runner-lost').lease);
    expect(await run).toMatchObject({ state: 'lost', exitCode: 137 });
    expect(sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-lost')!.calls).toEqual(['kill']);
  });

  it('tells the session until when its lease holds, less the margin, and moves that instant at each renewal', async () => {
    const a = await admit('runner-holds', 60_000);
    const before = performance.now();
    const run = runner.run(a, noShutdown);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-holds'));
    const seen = performance.now();
    const session = sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-holds')!;
    // The lease less the margin, counted from when the claim was sent: after `before`, before `seen`.
    expect(session.spec.holdsUntil).toBeGreaterThanOrEqual(before + LEASE_MS - MARGIN_MS);
    expect(session.spec.holdsUntil).toBeLessThanOrEqual(seen + LEASE_MS - MARGIN_MS);
    await until(() => session.renewals.length >= 1);
    expect(session.renewals[0]!).toBeGreaterThan(session.spec.holdsUntil);
    session.finish(0);
    expect(await run).toMatchObject({ state: 'completed' });
  });

  it('a lifetime changed through the API reaches the session at the next renewal: later, then sooner, ending as expired', async () => {
    const run = runner.run(await admit('runner-lifetime', 1500), noShutdown);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-lifetime'));
    const session = sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-lifetime')!;
    const firstDeadline = session.spec.deadlineAt;
    // Renewals come every second (LEASE 3000 ms / 3): the first one tells of the longer lifetime.
    expect(await coordinator.sessions.setLifetime('runner-lifetime', 60_000)).toMatchObject({ outcome: 'changed' });
    await until(() => session.deadlines.length === 1);
    expect(session.deadlines[0]!).toBeGreaterThan(performance.now() + 55_000);
    // The first deadline passes and the session runs on.
    await until(() => performance.now() > firstDeadline + 200);
    expect(session.calls).toEqual([]);
    const askedAt = performance.now();
    expect(await coordinator.sessions.setLifetime('runner-lifetime', 300)).toMatchObject({ outcome: 'changed' });
    const answeredAt = performance.now();
    expect(await run).toMatchObject({ state: 'expired', exitCode: 143, recorded: true });
    expect(session.calls).toEqual(['terminate']);
    expect(session.deadlines).toHaveLength(2);
    // The new deadline, on this clock: Redis's "now + 300" came between the ask and its answer, and the
    // renewal that told it counts from when it was sent, so it is never later than Redis's, and earlier
    // by at most that renewal's round trip (each side give or take Redis's whole milliseconds). The
    // renewal was sent no earlier than its holdsUntil less the lease and margin.
    const renewal = session.renewedAt.findLastIndex((at) => at <= session.deadlinesAt[1]!);
    const roundTrip = session.deadlinesAt[1]! - (session.renewals[renewal]! - (LEASE_MS - MARGIN_MS));
    expect(session.deadlines[1]!).toBeLessThanOrEqual(answeredAt + 300 + 2);
    expect(session.deadlines[1]!).toBeGreaterThanOrEqual(askedAt + 300 - roundTrip - 2);
    // Stopped at that deadline, not before, once the next renewal (within an interval) had told it.
    expect(session.stoppedAt!).toBeGreaterThanOrEqual(Math.min(session.deadlines[1]!, session.deadlinesAt[1]!) - 1);
    expect(session.deadlinesAt[1]! - askedAt).toBeLessThanOrEqual(RENEW_EVERY_MS + roundTrip);
  });

  it('a lifetime changed less than a renewal interval before the deadline still counts: the host renews once just before it', async () => {
    // Renewals come at 1 s and 2 s; the deadline (1.8 s) falls between them, so a change made after the
    // first one reaches the host only through the extra renewal DEADLINE_CHECK_MS (300 ms) before it.
    const run = runner.run(await admit('runner-late-change', 1800), noShutdown);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-late-change'));
    const session = sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-late-change')!;
    const firstDeadline = session.spec.deadlineAt;
    await until(() => session.renewals.length === 1);
    expect(await coordinator.sessions.setLifetime('runner-late-change', 60_000)).toMatchObject({ outcome: 'changed' });
    await until(() => session.deadlines.length === 1);
    // The new deadline arrived before the first one, with the second renewal, not the regular one after it.
    expect(session.deadlinesAt[0]!).toBeLessThan(firstDeadline);
    expect(session.renewedAt.findLastIndex((at) => at <= session.deadlinesAt[0]!)).toBe(1);
    await until(() => performance.now() > firstDeadline + 200);
    expect(session.calls).toEqual([]);
    session.finish(0);
    expect(await run).toMatchObject({ state: 'completed' });
  });

  it('a session the runtime ended without its lease, or lost with the runtime, is recorded as lost; at its deadline, as expired', async () => {
    for (const [cause, state] of [
      ['lease', 'lost'],
      ['runtime_lost', 'lost'],
      ['deadline', 'expired'],
    ] as const) {
      const userId = `runner-cause-${cause}`;
      const run = runner.run(await admit(userId, 60_000), noShutdown);
      await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === userId));
      sessions.find((s) => s.spec.sessionEnv['USER_ID'] === userId)!.finish(137, cause);
      expect(await run).toMatchObject({ state, exitCode: 137, recorded: true });
    }
  });
});

describe('idle sessions on the host', () => {
  const { coordinator, sessions, runner, admit, until } = harness();
  const noShutdown = new AbortController().signal;
  const sessionOf = (userId: string) => sessions.find((s) => s.spec.sessionEnv['USER_ID'] === userId);

  it('a session that does nothing is stopped at its idle timeout, before the first regular renewal, as stopped (idle)', async () => {
    const sentAt = performance.now();
    const run = runner.run(await admit('idle-quiet', 60_000, 400), noShutdown);
    await until(() => sessionOf('idle-quiet') !== undefined);
    expect(await run).toEqual({ ran: true, state: 'stopped', exitCode: 143, recorded: true });
    const session = sessionOf('idle-quiet')!;
    expect(session.calls).toEqual(['terminate']);
    // 400 ms after the claim (sent after sentAt), by the extra renewal: not at the regular one (1 s).
    expect(session.stoppedAt! - sentAt).toBeGreaterThanOrEqual(400);
    expect(session.stoppedAt! - sentAt).toBeLessThan(RENEW_EVERY_MS);
    expect((await coordinator.sessions.history('idle-quiet'))[0]).toMatchObject({ state: 'stopped', reason: 'idle' });
  });

  it('activity the session reports keeps it running; once it stops, the session is stopped an idle timeout later', async () => {
    const run = runner.run(await admit('idle-active', 60_000, 400), noShutdown);
    await until(() => sessionOf('idle-active') !== undefined);
    const session = sessionOf('idle-active')!;
    // Active every 100 ms for 1.5 s: well past the idle timeout and past the first renewal.
    const startedAt = performance.now();
    let lastActive = startedAt;
    while (performance.now() < startedAt + 1500) {
      lastActive = performance.now();
      session.spec.onActive!(lastActive);
      await sleep(100); // the session's own pace of activity
      expect(session.calls, 'still running while active').toEqual([]);
    }
    expect(await run).toMatchObject({ state: 'stopped', recorded: true });
    // Stopped an idle timeout after its last activity (which the next renewal carried), give or take a renewal's trip.
    expect(session.stoppedAt! - lastActive).toBeGreaterThanOrEqual(400 - 5);
    expect(session.stoppedAt! - lastActive).toBeLessThan(400 + 250);
    expect((await coordinator.sessions.history('idle-active'))[0]).toMatchObject({ reason: 'idle' });
  });

  it("activity from the service reaches the host's idle check through Redis", async () => {
    const run = runner.run(await admit('idle-service', 60_000, 400), noShutdown);
    await until(() => sessionOf('idle-service') !== undefined);
    const session = sessionOf('idle-service')!;
    const startedAt = performance.now();
    let lastActive = startedAt;
    while (performance.now() < startedAt + 1200) {
      lastActive = performance.now();
      expect(await coordinator.sessions.recordActivity('idle-service')).toMatchObject({ state: 'running' });
      await sleep(150); // the service's own pace of activity
      expect(session.calls, 'still running while the service reports activity').toEqual([]);
    }
    expect(await run).toMatchObject({ state: 'stopped', recorded: true });
    expect(session.stoppedAt! - lastActive).toBeGreaterThanOrEqual(400 - 5);
    expect((await coordinator.sessions.history('idle-service'))[0]).toMatchObject({ reason: 'idle' });
  });

  it('a stop through the API stays a plain stop (no reason), and a session without an idle timeout is never idle', async () => {
    const run = runner.run(await admit('idle-none', 60_000, 0), noShutdown);
    await until(() => sessionOf('idle-none') !== undefined);
    const session = sessionOf('idle-none')!;
    await until(() => session.renewals.length >= 1);
    expect(session.calls).toEqual([]);
    await coordinator.sessions.requestStop('idle-none');
    expect(await run).toMatchObject({ state: 'stopped', recorded: true });
    expect((await coordinator.sessions.history('idle-none'))[0]!.reason).toBeUndefined();
  });
  it("a nudge (the host's channel) renews the session at once: a stop reaches it well before its next renewal", async () => {
    const a = await admit('runner-nudged', 60_000);
    const run = runner.run(a, noShutdown);
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-nudged'));
    const session = sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-nudged')!;
    await coordinator.sessions.requestStop('runner-nudged');
    const nudgedAt = performance.now();
    runner.nudge('runner-nudged');
    expect(await run).toMatchObject({ state: 'stopped', exitCode: 143 });
    expect(session.stoppedAt! - nudgedAt).toBeLessThan(RENEW_EVERY_MS / 2);
  });

  it('a nudge that comes while the session is being claimed renews it as soon as it starts', async () => {
    const a = await admit('runner-nudged-early', 60_000);
    const run = runner.run(a, noShutdown);
    // The claim is in flight: run() has sent it and not had its answer.
    runner.nudge('runner-nudged-early');
    await until(() => sessions.some((s) => s.spec.sessionEnv['USER_ID'] === 'runner-nudged-early'));
    const session = sessions.find((s) => s.spec.sessionEnv['USER_ID'] === 'runner-nudged-early')!;
    await until(() => session.renewedAt.length > 0);
    expect(session.renewedAt[0]! - session.launchedAt).toBeLessThan(RENEW_EVERY_MS / 2);
    session.finish(0);
    expect((await run).ran).toBe(true);
  });
});
