import type { LiveSession } from '@cq/client';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, sessionOpening, stateWords } from '../format.js';
import { parseListFilter } from '../args.js';
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

/**
 * `stop <userId>`: stop the user's live session. `stop --label k=v [--state S] [--pool P] [--worker W]
 * [--user U]`: stop every live session the filters match, 1,000 per call until none is left.
 */
export const stop: Command = async (ctx, { positionals, options }) => {
  const filter = parseListFilter(options);
  const userId = positionals[0];
  if (userId !== undefined && Object.keys(filter).length === 0) {
    const stopped = await ctx.client.stopSession(userId);
    print(ctx, stopped, escaped`${stopped.userId}: ${stopped.state}, session ${stopped.sessionId}`);
    return exitCodes.ok;
  }
  if (userId !== undefined)
    throw new UsageError('stop takes a user id or filters (--label, --state, --pool, --worker, --user), not both');
  if (Object.keys(filter).length === 0)
    throw new UsageError('stop needs a user id, or filters: --label k=v, --state, --pool, --worker, --user');
  let matched = 0;
  let stopping = 0;
  for (let more = true; more;) {
    const answer = await ctx.client.stopSessions(filter);
    matched += answer.matched;
    stopping += answer.stopping;
    more = answer.more && answer.matched > 0;
  }
  print(ctx, { matched, stopping }, `${matched} matched, ${stopping} stopping or stopped`);
  return exitCodes.ok;
};

/** `ls [--state S] [--pool P] [--worker W] [--user U] [--label k=v ...] [--limit N]`: the live sessions of every user. */
export const ls: Command = async (ctx, { options }) => {
  const filter = parseListFilter(options);
  const limit = options.limit === undefined ? undefined : Number(options.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 500))
    throw new UsageError(`--limit must be a whole number from 1 to 500 (got "${options.limit}")`);
  let count = 0;
  for await (const page of ctx.client.listSessions(filter, limit === undefined ? {} : { limit }))
    for (const session of page) {
      count++;
      const labels = Object.entries(session.labels).map(([k, v]) => `${k}=${v}`);
      print(
        ctx,
        session,
        escaped`${session.userId}  ${describeSession(session)}  pool ${session.pool}` +
          (labels.length === 0 ? '' : escaped`  ${labels.join(' ')}`),
      );
    }
  if (!ctx.json) ctx.out(`${count} live session${count === 1 ? '' : 's'}`);
  return exitCodes.ok;
};
