import { parseIntOption, parseLabels, parseMetadata } from '../args.js';
import { print } from '../context.js';
import { oneLine } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import type { Command } from './command.js';

/** `token <userId> [--metadata JSON] [--ttl MS] [--lifetime MS] [--idle MS] [--label k=v ...] [--pool P]`: a one-time spawn token. */
export const token: Command = async (ctx, { options, need }) => {
  const metadata = parseMetadata(options.metadata);
  const ttlMs = parseIntOption(options.ttl, 'ttl');
  const lifetimeMs = parseIntOption(options.lifetime, 'lifetime');
  const idleTimeoutMs = parseIntOption(options.idle, 'idle');
  const labels = parseLabels(options.label);
  const issued = await ctx.client.issueToken({
    userId: need('a user id'),
    ...(metadata ? { metadata } : {}),
    ...(ttlMs ? { ttlMs } : {}),
    ...(lifetimeMs ? { lifetimeMs } : {}),
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    ...(labels === undefined ? {} : { labels }),
    ...(options.pool === undefined ? {} : { pool: options.pool }),
  });
  print(ctx, issued, oneLine(issued.token));
  return exitCodes.ok;
};
