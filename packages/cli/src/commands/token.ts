import type { IssueTokenRequest } from '@cq/client';
import { parseIntOption, parseLabels, parseMetadata, type Options } from '../args.js';
import { print } from '../context.js';
import { oneLine } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { command } from './command.js';

/** The options that say what a token admits: `token` takes them, and `spawn --user` for the token it issues. */
export const tokenOptions = ['metadata', 'ttl', 'lifetime', 'idle', 'label', 'pool'] as const;

/** The token request for `userId` with the {@link tokenOptions} given; a usage error naming a malformed one. */
export function tokenRequest(userId: string, options: Pick<Options, (typeof tokenOptions)[number]>): IssueTokenRequest {
  const metadata = parseMetadata(options.metadata);
  const ttlMs = parseIntOption(options.ttl, 'ttl');
  const lifetimeMs = parseIntOption(options.lifetime, 'lifetime');
  const idleTimeoutMs = parseIntOption(options.idle, 'idle');
  const labels = parseLabels(options.label);
  // Each one given is sent as given (0 included): the API says what it refuses, none is dropped here.
  return {
    userId,
    ...(metadata === undefined ? {} : { metadata }),
    ...(ttlMs === undefined ? {} : { ttlMs }),
    ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    ...(labels === undefined ? {} : { labels }),
    ...(options.pool === undefined ? {} : { pool: options.pool }),
  };
}

/** `token <userId> [--metadata JSON] [--ttl MS] [--lifetime MS] [--idle MS] [--label k=v ...] [--pool P]`: a one-time spawn token. */
export const token = command(tokenOptions, async (ctx, { options, need }) => {
  const issued = await ctx.client.issueToken(tokenRequest(need('a user id'), options));
  print(ctx, issued, oneLine(issued.token));
  return exitCodes.ok;
});
