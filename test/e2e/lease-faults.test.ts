// A session never outlives its lease, whatever happens to its worker host: each fault is injected for
// real, and judged by the sessions' own heartbeats in the observer file and by the lease key as the
// test itself sees it in Redis.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Admission } from '@cq/client';
import { Keys } from '@cq/coordinator';
import { describe, expect, it } from 'vitest';
import { watchHostLeases, watchLease, type LeaseWatch } from '../support/lease-watch.js';
import { overlapsIn } from '../support/load.js';
import { alive, sessionPids, until, type Started } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { cleanUp } from '@cq/test-harness';

const LEASE_MS = 3000;

/** What a fault case gets to work with. */
interface FaultContext {
  system: System;
  host: Started;
  /** The host's Redis connection goes through this proxy. */
  proxy: TcpProxy;
  /** The pid of the host's session runtime, as the host logged it. */
  runtimePid: number;
}

interface FaultCase {
  name: string;
  /** Injects the fault; resolves once it is in place. */
  inject(context: FaultContext): Promise<void>;
  /** Undoes it (SIGCONT, heal), when the host is meant to survive it. */
  recover?(context: FaultContext): Promise<void>;
  /** How the users' sessions end, as recorded. */
  recordedAs: 'lost';
}

const runtimePidOf = async (host: Started, after = 0): Promise<number> => {
  const line = await host.waitForLog((l) => l['msg'] === 'session runtime started' && l['runtimePid'] !== after);
  return line['runtimePid'] as number;
};

/** Spawns a session for `userId` and waits for its first beat; answers its admission and pid. */
async function beating(
  system: System,
  userId: string,
  metadata: Record<string, unknown> = {},
): Promise<{ admission: Admission; pids: number[] }> {
  const admission = await system.client.spawn((await system.client.issueToken({ userId, metadata })).token);
  await until(
    () => system.observed().some((o) => o.userId === userId && o.fence === admission.fence),
    10_000,
    `${userId} beating`,
  );
  const pids = sessionPids(userId, admission.fence);
  expect(pids.length).toBeGreaterThan(0);
  return { admission, pids };
}

const lastBeat = (system: System, userId: string, fence: number): number =>
  Math.max(
    ...system
      .observed()
      .filter((o) => o.userId === userId && o.fence === fence)
      .map((o) => o.at),
  );

const cases: FaultCase[] = [
  {
    name: 'SIGKILL of the host process alone',
    inject: async ({ host }) => void (await host.stop('SIGKILL')),
    recordedAs: 'lost',
  },
  {
    name: "SIGKILL of the host's whole process group",
    inject: async ({ host }) => {
      process.kill(-host.child.pid!, 'SIGKILL');
      await host.exited();
    },
    recordedAs: 'lost',
  },
  {
    name: `SIGSTOP of the host for longer than LEASE_MS, then SIGCONT`,
    inject: async ({ host }) => void process.kill(host.child.pid!, 'SIGSTOP'),
    recover: async ({ host }) => void process.kill(host.child.pid!, 'SIGCONT'),
    recordedAs: 'lost',
  },
  {
    name: 'the host cut off from Redis (a proxy that stops forwarding), then healed',
    inject: async ({ proxy }) => proxy.cut(),
    recover: async ({ proxy }) => proxy.heal(),
    recordedAs: 'lost',
  },
  {
    name: 'SIGKILL of the session runtime while the host lives',
    inject: async ({ runtimePid }) => void process.kill(runtimePid, 'SIGKILL'),
    recordedAs: 'lost',
  },
];

describe.each(cases)('$name', (fault) => {
  it('the sessions die before their leases could expire in Redis, end as lost, never overlap the next ones, and the survivors go on', async () => {
    const system = await startSystem({ workers: 0 });
    const redis = system.connect();
    const keys = new Keys(system.keyPrefix);
    const proxyTarget = system.target.kind === 'standalone' ? Number(new URL(system.target.url).port) : 0;
    const proxy = await startTcpProxy(proxyTarget);
    cleanUp(async () => {
      redis.disconnect();
      await proxy.close();
    });
    const host = await system.addWorker(
      'host-1',
      { REDIS_URL: proxy.url, SESSION_GRACE_MS: '5000' },
      { ownGroup: true },
    );
    const context: FaultContext = { system, host, proxy, runtimePid: await runtimePidOf(host) };

    // One session that stops on SIGTERM, one that ignores it: only SIGKILL ends the second.
    const users = ['fault-a', 'fault-b'];
    const sessions = [await beating(system, users[0]!), await beating(system, users[1]!, { ignoreTerm: true })];
    const watches: LeaseWatch[] = users.map((u) => watchLease(redis, keys.user(u).lease));
    await until(() => watches.every((w) => w.expiresAt > 0), 2000, 'leases seen');
    // Both are held under the host's lease (their own leases renewed far ahead): the host lease is what
    // keeps them running now, and what the fault takes away.
    await until(() => watches.every((w) => w.expiresAt > Date.now() + 2 * LEASE_MS), 5000, 'held under the host lease');
    const hostLease = watchHostLeases(redis, keys.hostLeases());
    await until(() => hostLease.expiresAt > 0, 2000, 'host lease seen');
    cleanUp(() => hostLease.stop());

    const injectedAt = performance.now();
    await fault.inject(context);
    await until(() => sessions.every((s) => !s.pids.some(alive)), LEASE_MS + 1000, 'session processes gone');
    await until(() => watches.every((w) => w.gone), LEASE_MS + 2000, 'leases expired or released');
    for (const [i, userId] of users.entries()) {
      const last = lastBeat(system, userId, sessions[i]!.admission.fence);
      // The guarantee: the session's last sign of life comes before Redis could let its lease go: its
      // own, and the host lease it is held under.
      expect(last).toBeLessThan(watches[i]!.expiresAt);
      expect(last).toBeLessThan(hostLease.expiresAt);
      console.info(
        `${fault.name}: ${userId}'s last beat ${hostLease.expiresAt - last} ms before its host lease could expire`,
      );
    }
    if (fault.recover !== undefined) {
      // A pause longer than the lease.
      await sleep(Math.max(0, LEASE_MS + 1000 - (performance.now() - injectedAt)));
      await fault.recover(context);
    }

    // Every session reaches a terminal state; nothing outlived the fault.
    for (const [i, userId] of users.entries()) {
      expect(await system.ended(userId, sessions[i]!.admission.sessionId)).toMatchObject({
        state: fault.recordedAs,
        workerId: 'host-1',
      });
    }

    // The users are served again: by the same host when it survived, else by a new one.
    const survived = host.child.exitCode === null && host.child.signalCode === null;
    expect(survived).toBe(fault.recover !== undefined || fault.name.includes('runtime'));
    const next = survived ? host : await system.addWorker('host-2');
    const again = await Promise.all(users.map((userId) => beating(system, userId)));
    expect((await system.client.findSession(users[0]!))?.workerId).toBe(survived ? 'host-1' : 'host-2');
    if (fault.name.includes('runtime')) {
      const newRuntime = await runtimePidOf(host, context.runtimePid);
      expect(alive(newRuntime)).toBe(true);
      expect(alive(context.runtimePid)).toBe(false);
    }
    // The survivor recorded nothing wrong: each ended session has exactly one entry, as lost.
    for (const [i, userId] of users.entries()) {
      const entries = (await system.client.history(userId)).filter(
        (h) => h.sessionId === sessions[i]!.admission.sessionId,
      );
      expect(entries.map((e) => e.state)).toEqual([fault.recordedAs]);
      // A host had it: lost by the host, not for want of one.
      expect(entries.map((e) => e.reason)).toEqual(['host_lost']);
    }
    expect(system.api.child.exitCode).toBeNull();
    if (fault.recover !== undefined) {
      // Woken up or healed, the host found its sessions gone and logged no error about it.
      expect(host.logs.filter((l) => (l['level'] as number) >= 50).map((l) => l['msg'])).toEqual([]);
    }

    // A clean stop ends everything: no session process and no runtime left running.
    expect(await next.stop('SIGTERM')).toBe(0);
    expect([...again, ...sessions].some((s) => s.pids.some(alive))).toBe(false);
    expect(alive(context.runtimePid)).toBe(false);
    const { overlaps } = overlapsIn(system.observed());
    expect(overlaps).toEqual([]);
  });
});
