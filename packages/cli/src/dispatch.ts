import { ApiError } from '@cq/client';
import { isGlobalOption, type Args, type Options } from './args.js';
import { commands, type Command } from './commands/index.js';
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
    refuseUndeclared(args.command, command, args.options);
    return await command.run(ctx, args);
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

/** A usage error naming the first option given that the command `name` does not take, before it runs. */
export function refuseUndeclared(name: string, command: Command, options: Options): void {
  for (const [option, value] of Object.entries(options))
    if (value !== undefined && !isGlobalOption(option) && !(command.options as readonly string[]).includes(option))
      throw new UsageError(`${name} does not take --${option}`);
}
