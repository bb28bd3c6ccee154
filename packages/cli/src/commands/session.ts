import type { LiveSession } from '@cq/client';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, endingWords, sessionOpening, stateWords } from '../format.js';
import { parseListFilter, parseSessionMatch } from '../args.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';

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

/** A session's labels as `k=v` pairs, escaped, or `no labels`. */
function labelWords(labels: Readonly<Record<string, string>>): string {
  const pairs = Object.entries(labels).map(([k, v]) => escaped`${k}=${v}`);
  return pairs.length === 0 ? 'no labels' : `labels ${pairs.join(' ')}`;
}

/** `status <userId>`: the user's live session. */
export const status = command([], async (ctx, { need }) => {
  const session = await ctx.client.getSession(need('a user id'));
  print(ctx, session, describeSession(session));
  return exitCodes.ok;
});

/** `session <sessionId>`: a session by its id, live (as `status` shows it) or ended (as its history entry). */
export const session = command([], async (ctx, { need }) => {
  const found = await ctx.client.getSession({ sessionId: need('a session id') });
  const text =
    'endedAt' in found
      ? escaped`${found.userId}: ` +
        endingWords(found) +
        escaped`, session ${found.sessionId}, ended at ${found.endedAt}`
      : describeSession(found);
  print(ctx, found, `${text}, ${escaped`pool ${found.pool}`}, ${labelWords(found.labels)}`);
  return exitCodes.ok;
});

/** `extend <userId> <ms> [--session ID]`: the live session now ends `ms` from now. */
export const extend = command(['session'], async (ctx, { need, positionals, options }) => {
  const userId = need('a user id and a lifetime in milliseconds');
  const ms = positionals[1];
  if (ms === undefined) throw new UsageError('extend needs a user id and a lifetime in milliseconds');
  if (!/^\d+$/.test(ms) || Number(ms) < 1)
    throw new UsageError(`the lifetime must be a whole number of milliseconds, at least 1 (got "${ms}")`);
  const session = await ctx.client.extend(userId, Number(ms), parseSessionMatch(options));
  print(ctx, session, describeSession(session));
  return exitCodes.ok;
});

/**
 * `labels <userId> [k=v ...] [k- ...] [--session ID]`: with no change, the live session's labels; else
 * sets each `k=v` and removes each `k-`, all at once or none (`PATCH`), and prints the labels it now has.
 */
export const labels = command(['session'], async (ctx, { need, positionals, options }) => {
  const userId = need('a user id');
  const change: Record<string, string | null> = {};
  for (const pair of positionals.slice(1)) {
    const at = pair.indexOf('=');
    if (at > 0) change[pair.slice(0, at)] = pair.slice(at + 1);
    else if (at < 0 && pair.length > 1 && pair.endsWith('-')) change[pair.slice(0, -1)] = null;
    else throw new UsageError(`labels takes key=value to set a label and key- to remove one (got "${pair}")`);
  }
  const reading = Object.keys(change).length === 0;
  // --session makes a change conditional; a read of the labels has none to make.
  if (reading && options.session !== undefined)
    throw new UsageError('labels --session needs changes (k=v, k-); cq session <sessionId> prints a session by its id');
  const session = reading
    ? await ctx.client.getSession(userId)
    : await ctx.client.updateSession(userId, { labels: change }, parseSessionMatch(options));
  print(
    ctx,
    session,
    escaped`${session.userId}: ` + `${labelWords(session.labels)}, ${escaped`session ${session.sessionId}`}`,
  );
  return exitCodes.ok;
});

/** `activity <userId> [--session ID]`: the user's session is in use; a running one's idle clock starts again. */
export const activity = command(['session'], async (ctx, { need, options }) => {
  const userId = need('a user id');
  const match = parseSessionMatch(options);
  await ctx.client.recordActivity(userId, match);
  print(
    ctx,
    { userId, ...match, activity: 'recorded' },
    escaped`${userId}: activity recorded${match.sessionId === undefined ? '' : `, session ${match.sessionId}`}` +
      "; a running session's idle clock starts again",
  );
  return exitCodes.ok;
});

/** What `stop` filters by: a user, or the sessions the filters match (the list's filters but --limit). */
const stopOptions = ['user', 'label', 'state', 'pool', 'worker', 'session'] as const;

/**
 * `stop <userId> [--session ID]` or `stop --user <userId> [--session ID]`: stop the user's live session.
 * `stop --label k=v [--state S] [--pool P] [--worker W] [--user U]` (any filter but `--user` alone): stop
 * every live session the filters match, 1,000 per call until none is left.
 */
export const stop = command(stopOptions, async (ctx, { positionals, options }) => {
  const { userId: userFilter, ...others } = parseListFilter(options);
  const bulk = Object.keys(others).length > 0;
  const positional = positionals[0];
  if (positional !== undefined && (bulk || userFilter !== undefined))
    throw new UsageError('stop takes a user id or filters (--label, --state, --pool, --worker, --user), not both');
  const userId = positional ?? (bulk ? undefined : userFilter);
  if (userId !== undefined) {
    const stopped = await ctx.client.stopSession(userId, parseSessionMatch(options));
    print(ctx, stopped, escaped`${stopped.userId}: ${stopped.state}, session ${stopped.sessionId}`);
    return exitCodes.ok;
  }
  if (!bulk) throw new UsageError('stop needs a user id, or filters: --label k=v, --state, --pool, --worker, --user');
  if (options.session !== undefined)
    throw new UsageError("--session names one user's session: stop <userId> --session ID, not with filters");
  const filter = { ...others, ...(userFilter === undefined ? {} : { userId: userFilter }) };
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
});

/** `ls [--state S] [--pool P] [--worker W] [--user U] [--label k=v ...] [--limit N]`: the live sessions of every user. */
export const ls = command(['state', 'pool', 'worker', 'user', 'label', 'limit'], async (ctx, { options }) => {
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
        describeSession(session) +
          escaped`  pool ${session.pool}` +
          (labels.length === 0 ? '' : escaped`  ${labels.join(' ')}`),
      );
    }
  if (!ctx.json) ctx.out(`${count} live session${count === 1 ? '' : 's'}`);
  return exitCodes.ok;
});
