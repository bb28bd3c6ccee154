import type { LiveSession } from '@cq/client';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, sessionOpening, stateWords } from '../format.js';
import { UsageError } from '../usage-error.js';
import type { Command } from './command.js';

function describeSession(s: LiveSession): string {
  const now = Date.now();
  const parts = sessionOpening({ ...s, words: stateWords(s.state, s.ready) });
  if (s.leaseExpiresAt) parts.push(`lease ${duration(Date.parse(s.leaseExpiresAt) - now)}`);
  if (s.deadline) parts.push(`lifetime left ${duration(Date.parse(s.deadline) - now)}`);
  if (s.lastActivityAt) parts.push(`last active ${duration(now - Date.parse(s.lastActivityAt))} ago`);
  if (s.idleTimeoutMs !== undefined) {
    const left = s.lastActivityAt ? ` (idle in ${duration(Date.parse(s.lastActivityAt) + s.idleTimeoutMs - now)})` : '';
    parts.push(`idle timeout ${duration(s.idleTimeoutMs)}${left}`);
  }
  return parts.join(', ');
}

/** `status <userId>`: the user's live session. */
export const status: Command = async (ctx, { need }) => {
  const session = await ctx.client.getSession(need('a user id'));
  print(ctx, session, describeSession(session));
  return exitCodes.ok;
};

/** `extend <userId> <ms>`: the live session now ends `ms` from now. */
export const extend: Command = async (ctx, { need, positionals }) => {
  const userId = need('a user id and a lifetime in milliseconds');
  const ms = positionals[1];
  if (ms === undefined) throw new UsageError('extend needs a user id and a lifetime in milliseconds');
  if (!/^\d+$/.test(ms) || Number(ms) < 1)
    throw new UsageError(`the lifetime must be a whole number of milliseconds, at least 1 (got "${ms}")`);
  const session = await ctx.client.extend(userId, Number(ms));
  print(ctx, session, describeSession(session));
  return exitCodes.ok;
};

/** `stop <userId>`: stop the user's live session. */
export const stop: Command = async (ctx, { need }) => {
  const stopped = await ctx.client.stopSession(need('a user id'));
  print(ctx, stopped, escaped`${stopped.userId}: ${stopped.state}, session ${stopped.sessionId}`);
  return exitCodes.ok;
};
