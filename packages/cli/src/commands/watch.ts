import { NoSessionError, type EndedSession, type StreamedEvent } from '@cq/client';
import { isFinalEventType } from '@cq/contract';
import { print, type Context } from '../context.js';
import { escaped, oneLine } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, eventWords, sessionOpening } from '../format.js';
import type { Command } from './command.js';

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

async function follow(ctx: Context, userId: string): Promise<number> {
  const tty = process.stdout.isTTY === true && !ctx.json;
  // Follow the live session's event stream (its current state first, then each change as it happens);
  // the stream ends after the session does, and its end is reported from the history below. Without a
  // live session the stream would wait for the next one: report how the last one ended instead.
  const sessionId = (await ctx.client.findSession(userId))?.sessionId;
  const stop = new AbortController();
  const events = ctx.client.events({
    userId,
    signal: stop.signal,
    // Gone before the stream was subscribed, its end would never be streamed: it is in the history.
    onOpen: () =>
      void ctx.client.findSession(userId).then(
        (now) => now?.sessionId !== sessionId && stop.abort(),
        () => stop.abort(),
      ),
  });
  for await (const event of sessionId === undefined ? [] : events) {
    if (event.type === 'error') continue;
    // The followed session ended between two looks and a newer one is streamed: report the followed one.
    if (event.sessionId !== sessionId) break;
    // After a final event the session is over (`withdrawn`: its admission was rolled back).
    if (isFinalEventType(event.type)) break;
    const line = describeEvent(event);
    if (ctx.json) ctx.out(JSON.stringify(event));
    // The status line is rewritten in place: ours the CR and the erase, the line after them one line, escaped.
    else if (tty) process.stdout.write(`\r\x1b[2K${oneLine(line)}`);
    else ctx.out(line);
  }
  if (tty) process.stdout.write('\n');
  const history = await ctx.client.history(userId);
  // Nothing live when we first looked: the user's last session may have ended a moment ago (or long
  // before); report how it ended rather than "no session".
  const ended = sessionId === undefined ? history[0] : history.find((h) => h.sessionId === sessionId);
  if (sessionId === undefined && ended === undefined)
    throw new NoSessionError(404, 'no_session', `User ${userId} has no live or ended session.`, undefined);
  if (ended === undefined) {
    print(
      ctx,
      { userId, sessionId, state: 'replaced' },
      escaped`${userId}: session ${sessionId} was replaced by a newer one`,
    );
    return exitCodes.ok;
  }
  const when = sessionId === undefined ? ` at ${ended.endedAt}` : '';
  const why = ended.reason === undefined ? '' : ` (${ended.reason})`;
  const code = ended.exitCode === undefined ? '' : ` (exit code ${ended.exitCode})`;
  print(ctx, { userId, ...ended }, escaped`${userId}: ${ended.state}${why}${code}, session ${ended.sessionId}${when}`);
  return endCodes[ended.state];
}

/** `watch <userId>`: follow the live session until it ends (or say how the last one ended). */
export const watch: Command = async (ctx, { need }) => await follow(ctx, need('a user id'));
