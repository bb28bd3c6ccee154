import { exitCodes } from '../exit-codes.js';
import { table } from '../format.js';
import { command } from './command.js';

/** `history <userId>`: the user's ended sessions. */
export const history = command([], async (ctx, { need }) => {
  const sessions = await ctx.client.history(need('a user id'));
  if (ctx.json) ctx.out(JSON.stringify({ sessions }));
  else if (sessions.length === 0) ctx.out('no ended sessions');
  else
    ctx.out(
      table([
        ['ENDED', 'STATE', 'FENCE', 'EXIT', 'WORKER', 'SESSION'],
        ...sessions.map((s) => [
          s.endedAt,
          s.reason === undefined ? s.state : `${s.state} (${s.reason})`,
          String(s.fence),
          s.exitCode === undefined ? '-' : String(s.exitCode),
          s.workerId ?? '-',
          s.sessionId,
        ]),
      ]),
    );
  return exitCodes.ok;
});
