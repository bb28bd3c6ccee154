import { NoSessionError, type OutputLineData } from '@cq/client';
import type { Context } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { command } from './command.js';

/**
 * One line as printed: `<time> <stream> <line>` (stderr marked) with the session's text escaped (it
 * cannot drive the terminal nor rewrite the lines above it), or the line as JSON with `--json`.
 */
function show(ctx: Context, line: OutputLineData): void {
  ctx.out(
    ctx.json ? JSON.stringify(line) : escaped`${line.at} ${line.stream === 'stderr' ? 'err' : 'out'} ${line.line}`,
  );
}

/** The session whose output is shown: the user's live one, else the user's latest ended one. */
async function sessionOf(ctx: Context, userId: string): Promise<string> {
  const live = await ctx.client.findSession(userId);
  if (live !== undefined) return live.sessionId;
  const latest = (await ctx.client.history(userId))[0];
  if (latest === undefined)
    throw new NoSessionError(404, 'no_session', `User ${userId} has no live or ended session.`, undefined);
  return latest.sessionId;
}

/**
 * `logs <userId> [--follow]`: the output of the user's current session, else of the latest ended one;
 * `--follow` goes on printing new lines until the session ends.
 */
export const logs = command(['follow'], async (ctx, { need, options }) => {
  const userId = need('a user id');
  const sessionId = await sessionOf(ctx, userId);
  if (options.follow === true) {
    for await (const line of ctx.client.followLogs(userId, sessionId)) show(ctx, line);
    return exitCodes.ok;
  }
  let page = await ctx.client.logs(userId, sessionId);
  for (;;) {
    for (const line of page.lines) show(ctx, line);
    if (!page.more) break;
    page = await ctx.client.logs(userId, sessionId, { after: page.lines.at(-1)!.id });
  }
  if (page.droppedBytes > 0 && !ctx.json)
    process.stderr.write(
      escaped`cq: ${page.droppedBytes} bytes of this session's output were dropped (over LOG_RATE_BYTES)\n`,
    );
  return exitCodes.ok;
});
