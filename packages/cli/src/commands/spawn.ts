import { USER_ID_PATTERN, tokenParts } from '@cq/contract';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration } from '../format.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';
import { tokenOptions, tokenRequest } from './token.js';

/** The usage error for a `spawn` argument that cannot be a token: a user id is pointed at `--user`. */
function notAToken(text: string): UsageError {
  // Something like a token, cut short or altered, is no user id to suggest.
  if (USER_ID_PATTERN.test(text) && !text.startsWith('v1.'))
    return new UsageError(`"${text}" is not a spawn token; to spawn for a user, use cq spawn --user ${text}`);
  return new UsageError(`"${text}" is not a spawn token (cq token <userId> prints one)`);
}

/**
 * `spawn <token>`: admit a spawn with a token. `spawn --user <userId>` with any option of `token`: issue a
 * token for the user with those options, and spawn with it.
 */
export const spawn = command(['user', ...tokenOptions], async (ctx, { options, positionals }) => {
  const given = positionals[0];
  let token: string;
  if (options.user !== undefined) {
    if (given !== undefined) throw new UsageError('spawn takes a token or --user <userId>, not both');
    token = (await ctx.client.issueToken(tokenRequest(options.user, options))).token;
  } else {
    if (given === undefined) throw new UsageError('spawn needs a token, or --user <userId>');
    // Refused here, before any call: the API would answer token_invalid, which says nothing of --user.
    if (tokenParts(given) === undefined) throw notAToken(given);
    // The token says what it admits: these options are for the token spawn --user issues.
    const misplaced = tokenOptions.find((name) => options[name] !== undefined);
    if (misplaced !== undefined)
      throw new UsageError(
        `spawn <token> does not take --${misplaced}: the token says what it admits (spawn --user takes it)`,
      );
    token = given;
  }
  const admitted = await ctx.client.spawn(token);
  print(
    ctx,
    admitted,
    escaped`${admitted.userId}: admitted, fence ${admitted.fence}, session ${admitted.sessionId}` +
      `, lifetime ${duration(admitted.lifetimeMs)}`,
  );
  return exitCodes.ok;
});
