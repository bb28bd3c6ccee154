import { ApiError } from '@cq/client';
import type { Args } from './args.js';
import { commands } from './commands/index.js';
import type { Context } from './context.js';
import { exitCodeOf, exitCodes } from './exit-codes.js';
import { describeError, remedyOf } from './format.js';
import { UsageError, usageLine } from './usage-error.js';

/**
 * Runs the command `args` names and resolves with its exit code. A usage error prints one line naming
 * the mistake and pointing at `cq --help`; any other error prints one line (JSON with `--json` for an
 * API error) and exits with its code.
 */
export async function dispatch(ctx: Context, args: Args): Promise<number> {
  try {
    const command = commands.get(args.command);
    if (command === undefined) throw new UsageError(`unknown command "${args.command}"`);
    return await command(ctx, args);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(usageLine(err));
      return exitCodes.usage;
    }
    if (ctx.json && err instanceof ApiError) {
      const remedy = remedyOf(err, ctx.target);
      const error = { code: err.code, message: err.message, status: err.status, ...(remedy ? { remedy } : {}) };
      process.stderr.write(`${JSON.stringify({ error })}\n`);
    } else process.stderr.write(`${describeError(err, ctx.target)}\n`);
    return exitCodeOf(err);
  }
}
