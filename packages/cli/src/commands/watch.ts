import { UnavailableError, type EndedSession, type StreamedEvent } from '@cq/client';
import { isFinalEventType } from '@cq/contract';
import { print, type Context } from '../context.js';
import { escaped, oneLine } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, endingWords, eventWords, sessionOpening } from '../format.js';
import { command } from './command.js';

/** Exit codes of `watch` for the state the session ended in. */
const endCodes: Record<EndedSession['state'], number> = {
  completed: 0,
  failed: 10,
  expired: 11,
  stopped: 12,
  lost: 13,
};

function describeEvent(e: Exclude<StreamedEvent, { type: 'error' }>): string {
  const parts = sessionOpening({ ...e, words: eventWords(e.type) });
  if (e.type === 'running' && e.deadline) parts.push(`lifetime left ${duration(Date.parse(e.deadline) - Date.now())}`);
  return parts.join(', ');
}

/** Prints how `ended` ended (`at` its end when it ended before watch began) and answers its exit code. */
function report(ctx: Context, userId: string, ended: EndedSession, past: boolean): number {
  const when = past ? escaped` at ${ended.endedAt}` : '';
  print(
    ctx,
    { userId, ...ended },
    escaped`${userId}: ` + endingWords(ended) + escaped`, session ${ended.sessionId}` + when,
  );
  return endCodes[ended.state];
}

/**
 * Follows the user's live session to its end. Without one: reports how the last one ended, unless
 * `next` is set or the user never had a session; then it waits for the user's next session and follows
 * that one.
 */
async function follow(ctx: Context, userId: string, next: boolean): Promise<number> {
  const tty = process.stdout.isTTY === true && !ctx.json;
  const live = await ctx.client.findSession(userId);
  /** Waiting for the next session; `before` is the newest ended one when watch began. */
  const waiting = live === undefined;
  let before: string | undefined;
  if (waiting) {
    const last = (await ctx.client.history(userId))[0];
    if (last !== undefined && !next) return report(ctx, userId, last, true);
    before = last?.sessionId;
  }
  // The session followed: the live one, else the first one the stream shows.
  let followed = live?.sessionId;
  // A session that was live and ended before the stream was subscribed is never streamed: its end is in
  // the history, read once the stream is open (`gone`); a failed look ends the watch with its error.
  let gone: EndedSession | 'replaced' | undefined;
  let lookFailed: { error: unknown } | undefined;
  const stop = new AbortController();
  const look = async (): Promise<void> => {
    if (waiting) {
      const newest = (await ctx.client.history(userId))[0];
      if (newest !== undefined && newest.sessionId !== before) gone = newest;
    } else if ((await ctx.client.findSession(userId))?.sessionId !== followed) gone = 'replaced';
    if (gone !== undefined) stop.abort();
  };
  const events = ctx.client.events({
    userId,
    signal: stop.signal,
    onOpen: () => {
      if (waiting && !ctx.json)
        process.stderr.write(
          escaped`cq: ${userId} has no live session; waiting for the next one (the stream is open)\n`,
        );
      look().catch((error: unknown) => {
        lookFailed = { error };
        stop.abort();
      });
    },
  });
  for await (const event of events) {
    if (event.type === 'error') continue;
    followed ??= event.sessionId;
    // The followed session ended between two looks and a newer one is streamed: report the followed one.
    if (event.sessionId !== followed) break;
    const withdrawn = event.type === 'withdrawn';
    // After any other final event the session is over: its end is reported from the history below.
    if (isFinalEventType(event.type) && !withdrawn) break;
    const line = describeEvent(event);
    if (ctx.json) ctx.out(JSON.stringify(event));
    // The status line is rewritten in place: ours the CR and the erase, the line after them one line, escaped.
    else if (tty) process.stdout.write(`\r\x1b[2K${oneLine(line)}${withdrawn ? '\n' : ''}`);
    else ctx.out(line);
    // Withdrawn: its admission was rolled back, so it never was; the stream goes on with the next session.
    if (withdrawn) followed = undefined;
  }
  if (tty) process.stdout.write('\n');
  if (lookFailed !== undefined) throw lookFailed.error;
  if (gone !== undefined && gone !== 'replaced') return report(ctx, userId, gone, false);
  if (followed === undefined)
    throw new UnavailableError(
      0,
      'stream_closed',
      `The event stream closed before ${userId}'s next session ended; run cq watch again.`,
      undefined,
    );
  const ended = (await ctx.client.history(userId)).find((h) => h.sessionId === followed);
  if (ended !== undefined) return report(ctx, userId, ended, false);
  const now = await ctx.client.findSession(userId);
  if (now?.sessionId === followed)
    throw new UnavailableError(
      0,
      'stream_closed',
      `The event stream closed before session ${followed} ended; run cq watch again.`,
      undefined,
    );
  print(
    ctx,
    { userId, sessionId: followed, state: 'replaced' },
    escaped`${userId}: session ${followed} was replaced by a newer one`,
  );
  return exitCodes.ok;
}

/**
 * `watch <userId> [--next]`: follow the live session until it ends. With no live session: say how the
 * last one ended, or, with `--next` or when the user has had no session yet, wait for the next one and
 * follow it.
 */
export const watch = command(
  ['next'],
  async (ctx, { need, options }) => await follow(ctx, need('a user id'), options.next === true),
);
