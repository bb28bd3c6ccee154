import { beforeAll, describe, expect, inject, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { Coordinator } from './coordinator.js';
import { WEBHOOK_DISPATCH_LEASE } from './keys.js';
import { loadScripts, scriptNames } from './script-loader.js';
import { slotOf } from './slots.js';
import { testCoordinator } from './test-support/setup.js';
import { cleanUp, type Seen, watchClient } from '@cq/test-harness';

// Every public coordinator operation, run once; each must cost exactly one command (or the commands its
// third element names) and each command touch one slot.
function operations(c: Coordinator): Array<[string, () => Promise<unknown>, number?]> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- results of differently typed steps
  const state: Record<string, any> = {};
  const worker = { workerId: 'w1', leaseMs: 5000, graceMs: 1000 };
  return [
    ['tokens.issue', async () => (state['t1'] = await c.tokens.issue('slot-user', {}))],
    ['tokens.consume', () => c.tokens.consume(state['t1'].token)],
    ['tokens.issue (second)', async () => (state['t2'] = await c.tokens.issue('slot-user', { metadata: { a: 1 } }))],
    // The first session of a slot enters the slot in the session list's directory: admit (unlisted),
    // enterDirectory, SET of the slot's `listed` key, admit again. Later ones are one command.
    ['sessions.admit (first in its slot)', async () => (state['a'] = await c.sessions.admit(state['t2'].token)), 4],
    ['sessions.admit (rejected: token_invalid)', () => c.sessions.admit(state['t2'].token)],
    ['sessions.cancelAdmission', () => c.sessions.cancelAdmission(state['t2'].token, state['a'].sessionId)],
    ['sessions.admit (again)', async () => (state['a'] = await c.sessions.admit(state['t2'].token))],
    ['tokens.issue (third)', async () => (state['t3'] = await c.tokens.issue('slot-user', {}))],
    ['sessions.admit (rejected: session_exists)', () => c.sessions.admit(state['t3'].token)],
    ['sessions.claim', async () => (state['c'] = await c.claims.claim(state['a'], worker))],
    ['sessions.renew', () => c.claims.renew(state['c'].claim, 10)],
    ['sessions.renew (held: learns the Redis process)', () => c.claims.renew(state['c'].claim, 10, { run: true })],
    ['claims.probe', () => c.claims.probe('slot-user')],
    ['sessions.recordActivity', () => c.sessions.recordActivity('slot-user')],
    ['claims.markReady', () => c.claims.markReady(state['c'].claim, 'http://10.0.0.1:1')],
    [
      'output.append',
      () =>
        c.output.append('slot-user', state['a'].sessionId, [{ stream: 'stdout', line: 'x' }], {
          keepLines: 10,
          keepForMs: 60_000,
          droppedBytes: 0,
        }),
    ],
    ['output.read', () => c.output.read('slot-user', state['a'].sessionId)],
    ['webhooks.create', () => c.webhooks.create({ url: 'https://example.com/hook', events: [], sealedSecret: 'x' })],
    [
      'webhooks.record',
      () => c.webhooks.record('wh_none', { eventId: '1-0-0', type: 'completed', attempt: 1, status: 200, at: 1 }),
    ],
    ['sessions.settleAndRead', () => c.sessions.settleAndRead('slot-user')],
    ['sessions.setLifetime', () => c.sessions.setLifetime('slot-user', 60_000)],
    // A running session's stop: the script, then the nudge posted to its host ({workers} slot).
    ['sessions.requestStop', () => c.sessions.requestStop('slot-user'), 2],
    ['sessions.sweepUser', () => c.sessions.sweepUser('slot-user')],
    ['sessions.finish', () => c.claims.finish(state['c'].claim, 'stopped', 0)],
    ['sessions.history', () => c.sessions.history('slot-user')],
    // A session by id: its slot's ids (HGET), the user's live session (readSession), the history (LRANGE).
    ['sessions.byId', () => c.sessions.byId(state['a'].sessionId), 3],
    // The list finds the slot empty now: the directory (ZRANGEBYSCORE), the slot's index and `listed`
    // key (ZRANGE, GET), then unlistSlot and dropDirectory.
    ['sessions.list (finds the slot empty and unlists it)', () => c.sessions.list(), 5],
    ['sessions.admit (rejected: throttled)', () => c.sessions.admit(state['t3'].token)],
    [
      'leases.acquire',
      async () => (state['l'] = await c.leases.acquire('slot-resource', { leaseMs: 1000, maxLifetimeMs: 5000 })),
    ],
    ['leases.renew', () => c.leases.renew(state['l'].lease)],
    ['leases.release', () => c.leases.release(state['l'].lease)],
    [
      'leases.acquire (webhook dispatch)',
      async () => (state['d'] = await c.leases.acquire(WEBHOOK_DISPATCH_LEASE, { leaseMs: 1000, maxLifetimeMs: 5000 })),
    ],
    ['webhooks.setCursor', () => c.webhooks.setCursor('1-0-0', state['d'].lease)],
    ['gcra.check', () => c.gcraLimiter({ name: 'g', intervalMs: 100 }).check('x')],
    ['fixedWindow.check', () => c.fixedWindowLimiter({ name: 'f', limit: 1, windowMs: 100 }).check('x')],
    ['slidingWindow.check', () => c.slidingWindowLimiter({ name: 's', limit: 1, windowMs: 100 }).check('x')],
    ['workers.heartbeat', () => c.workers.heartbeat({ workerId: 'w1', slots: 4, busy: 1, startedAt: 1 }, 5000)],
    ['workers.reserve', () => c.workers.reserve('s1', 5000, true)],
    ['workers.capacity', () => c.workers.capacity()],
    ['workers.drain', () => c.workers.drain('w1')],
    ['workers.release', () => c.workers.release(['s1'])],
    [
      'workers.publish (with a host lease)',
      () =>
        c.workers.publish(
          {
            workerId: 'w1',
            slots: 4,
            busy: 1,
            startedAt: 1,
            lease: { token: 'w1/t', ttlMs: 5000, fresh: true, register: [{ sessionId: 's1', userId: 'slot-user' }] },
          },
          5000,
        ),
    ],
    ['workers.expiredLeases', () => c.workers.expiredLeases()],
    ['workers.recountCapacity', () => c.workers.recountCapacity()],
    ['workers.leaseSessions', () => c.workers.leaseSessions('w1/t')],
    ['workers.forgetLease', () => c.workers.forgetLease('w1/t')],
    ['workers.withdraw', () => c.workers.withdraw('w1', [], 'default', 'w1/t')],
  ];
}

/** Operations that are one plain command rather than a script. */
const plainCommands: Record<string, string> = { 'sessions.history': 'lrange', 'workers.leaseSessions': 'hgetall' };

/** The keys a command names: for EVALSHA/EVAL the numkeys keys; for plain commands the first argument. */
function keysOf(seen: Seen): string[] {
  const [name, , numkeys, ...rest] = seen.args;
  if (/^eval(sha)?$/i.test(name ?? '')) return rest.slice(0, Number(numkeys));
  return seen.args[1] === undefined ? [] : [seen.args[1]];
}

describe('one round trip, one slot', () => {
  const coordinator = testCoordinator({ policy: { spawnIntervalMs: 60_000 } });
  let watch: Awaited<ReturnType<typeof watchClient>>;

  beforeAll(async () => {
    watch = await watchClient(coordinator.redis as never, inject('redisUrl'));
  });
  cleanUp(() => watch.stop());

  it('every coordinator operation is exactly one command, and every script keeps its KEYS on one slot', async () => {
    const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');
    const scriptBySha = new Map([...loadScripts().values()].map((s) => [sha1(s.lua), s.name]));
    // MONITOR shows an EVAL's script text escaped; its opening sentence is enough to name it.
    const scriptByOpening = [...loadScripts().values()].map(
      (s) => [s.lua.split('\n')[1]!.trim().slice(0, 60), s.name] as const,
    );
    const ran = new Set<string>();
    const ops = operations(coordinator);
    for (const [name, run, count = 1] of ops) {
      await watch.settle();
      const before = watch.seen.length;
      await run();
      await watch.settle();
      const sent = watch.seen.slice(before);
      expect(
        sent.map((s) => s.args[0]),
        name,
      ).toHaveLength(count);
      for (const seen of sent) {
        const command = seen.args[0]!.toLowerCase();
        // ioredis sends EVAL the first time a connection runs a script, EVALSHA after: one command either way.
        const scripted = command === 'eval' || command === 'evalsha';
        if (count === 1) expect(scripted ? 'script' : command, name).toBe(plainCommands[name] ?? 'script');
        if (command === 'evalsha') ran.add(scriptBySha.get(seen.args[1]!) ?? 'unknown');
        if (command === 'eval')
          ran.add(scriptByOpening.find(([opening]) => seen.args[1]!.includes(opening))?.[1] ?? 'unknown');
        const keys = keysOf(seen);
        expect(keys.length, name).toBeGreaterThan(0);
        const slots = new Set(keys.map(slotOf));
        expect(slots.size, `${name} touches keys on ${slots.size} slots: ${keys.join(' ')}`).toBe(1);
      }
    }
    // publishEventMark names no key: the event feed sends it to each master itself (see events.test.ts).
    // renewSweepTurn (one key) runs only inside the sweeper's loop (see sweeper.test.ts).
    const keyed = scriptNames.filter((name) => name !== 'publishEventMark' && name !== 'renewSweepTurn');
    expect([...ran].sort(), 'every script was exercised').toEqual([...keyed].sort());
  });
});
