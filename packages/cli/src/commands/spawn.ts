import { parseIntOption, parseMetadata } from '../args.js';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration } from '../format.js';
import { UsageError } from '../usage-error.js';
import type { Command } from './command.js';

/** `spawn <token>`, or `spawn --user <userId> [--metadata JSON] [--lifetime MS] [--idle MS]`: admit a spawn. */
export const spawn: Command = async (ctx, { options, positionals }) => {
  let token = positionals[0];
  if (options.user !== undefined) {
    const metadata = parseMetadata(options.metadata);
    const lifetimeMs = parseIntOption(options.lifetime, 'lifetime');
    const idleTimeoutMs = parseIntOption(options.idle, 'idle');
    token = (
      await ctx.client.issueToken({
        userId: options.user,
        ...(metadata ? { metadata } : {}),
        ...(lifetimeMs ? { lifetimeMs } : {}),
        ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      })
    ).token;
  }
  if (token === undefined) throw new UsageError('spawn needs a token, or --user <userId>');
  const admitted = await ctx.client.spawn(token);
  print(
    ctx,
    admitted,
    escaped`${admitted.userId}: admitted, fence ${admitted.fence}, session ${admitted.sessionId}` +
      `, lifetime ${duration(admitted.lifetimeMs)}`,
  );
  return exitCodes.ok;
};
