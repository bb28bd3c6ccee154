import { setTimeout as sleep } from 'node:timers/promises';
import { parseIntOption } from '../args.js';
import type { Context } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { describeError, stateWords } from '../format.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';

async function run(ctx: Context, users: number): Promise<number> {
  const say = (line: string): void => (ctx.json ? undefined : ctx.out(line));
  const events: unknown[] = [];
  const event = (value: Record<string, unknown>): void => {
    events.push(value);
    if (ctx.json) ctx.out(JSON.stringify(value));
  };
  const names = Array.from(
    { length: users },
    (_, i) => `demo-${['alice', 'bob', 'carol', 'dave', 'erin', 'frank'][i % 6]}${i >= 6 ? i : ''}`,
  );
  say(`spawning a session for ${names.join(', ')}; the last one is capped at 3 s of lifetime and will expire`);
  const sessions = new Map<string, string>();
  for (const [i, userId] of names.entries()) {
    const last = i === names.length - 1;
    try {
      const { token } = await ctx.client.issueToken({
        userId,
        metadata: { durationMs: last ? 60_000 : 3000 + 1000 * i },
        ...(last ? { lifetimeMs: 3000 } : {}),
      });
      const admitted = await ctx.client.spawn(token);
      sessions.set(userId, admitted.sessionId);
      event({ userId, event: 'admitted', sessionId: admitted.sessionId, fence: admitted.fence });
      say(escaped`  ${userId}: admitted, fence ${admitted.fence}, session ${admitted.sessionId}`);
    } catch (err) {
      event({ userId, event: 'refused', error: describeError(err) });
      say(`  ${userId}: ${describeError(err)}`);
    }
  }
  const first = names[0]!;
  say(`asking again for ${first} while the first session is live:`);
  try {
    await ctx.client.spawn((await ctx.client.issueToken({ userId: first })).token);
    say(`  ${first}: admitted (the first session had already ended)`);
  } catch (err) {
    event({ userId: first, event: 'refused', error: describeError(err) });
    say(`  ${first}: ${describeError(err)}`);
  }
  if (names.length > 1) {
    const second = names[1]!;
    say(`stopping ${second}, then asking again as soon as it has ended (the spawn throttle applies):`);
    const stopped = sessions.get(second);
    // Refused the first time (throttled by an earlier run), it has no session here to wait for.
    if (stopped !== undefined) {
      await ctx.client.stopSession(second, { sessionId: stopped }).catch(() => undefined);
      for (let i = 0; i < 100 && (await ctx.client.findSession(second))?.sessionId === stopped; i++) await sleep(100);
    }
    try {
      const admitted = await ctx.client.spawn(
        (await ctx.client.issueToken({ userId: second, metadata: { durationMs: 2000 } })).token,
      );
      sessions.set(second, admitted.sessionId);
      say(escaped`  ${second}: admitted again, fence ${admitted.fence} (the throttle was already open)`);
    } catch (err) {
      event({ userId: second, event: 'refused', error: describeError(err) });
      say(`  ${second}: ${describeError(err)}`);
    }
  }
  say('following every session to its end:');
  const pending = new Set(sessions.keys());
  const seen = new Map<string, string>();
  const deadline = Date.now() + 120_000;
  while (pending.size > 0 && Date.now() < deadline) {
    for (const userId of [...pending]) {
      const live = await ctx.client.findSession(userId);
      if (live !== undefined && live.sessionId === sessions.get(userId)) {
        const words = stateWords(live.state, live.ready);
        if (seen.get(userId) !== words) {
          seen.set(userId, words);
          event({ userId, event: live.state, ready: live.ready, sessionId: live.sessionId, workerId: live.workerId });
          say(escaped`  ${userId}: ${words}${live.workerId ? ` on ${live.workerId}` : ''}`);
        }
        continue;
      }
      const ended = (await ctx.client.history(userId)).find((h) => h.sessionId === sessions.get(userId));
      if (ended !== undefined) {
        pending.delete(userId);
        event({ userId, event: ended.state, sessionId: ended.sessionId, exitCode: ended.exitCode });
        say(
          escaped`  ${userId}: ${ended.state}${ended.exitCode === undefined ? '' : ` (exit code ${ended.exitCode})`}`,
        );
      }
    }
    if (pending.size > 0) await sleep(300);
  }
  if (pending.size > 0) {
    say(`still running after 2 minutes: ${[...pending].join(', ')} (are worker hosts running?)`);
    return exitCodes.unavailable;
  }
  say('done');
  return exitCodes.ok;
}

/** `demo [--users N]`: spawn sessions for a few users and show what happens. */
export const demo = command(['users'], async (ctx, { options }) => {
  const users = parseIntOption(options.users, 'users') ?? 3;
  if (users < 1 || users > 20) throw new UsageError('--users must be from 1 to 20');
  return await run(ctx, users);
});
