import { parseIntOption, parseMetadata } from '../args.js';
import { print } from '../context.js';
import { oneLine } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import type { Command } from './command.js';

/** `token <userId> [--metadata JSON] [--ttl MS] [--lifetime MS] [--idle MS]`: issue a one-time spawn token. */
export const token: Command = async (ctx, { options, need }) => {
  const metadata = parseMetadata(options.metadata);
  const ttlMs = parseIntOption(options.ttl, 'ttl');
  const lifetimeMs = parseIntOption(options.lifetime, 'lifetime');
  const idleTimeoutMs = parseIntOption(options.idle, 'idle');
  const issued = await ctx.client.issueToken({
    userId: need('a user id'),
    ...(metadata ? { metadata } : {}),
    ...(ttlMs ? { ttlMs } : {}),
    ...(lifetimeMs ? { lifetimeMs } : {}),
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
  });
  print(ctx, issued, oneLine(issued.token));
  return exitCodes.ok;
};
