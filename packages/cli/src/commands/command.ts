import type { Args, CommandOption } from '../args.js';
import type { Context } from '../context.js';

/**
 * A command: the options it takes beside the global ones (dispatch refuses any other, so none is ignored
 * silently), and what runs against the API and resolves with the exit code.
 */
export interface Command<O extends CommandOption = CommandOption> {
  readonly options: readonly O[];
  readonly run: (ctx: Context, args: Args<O>) => Promise<number>;
}

/** A command taking `options`: `run` sees those alone (and the global ones), so it cannot read one it does not declare. */
export function command<const O extends CommandOption = never>(
  options: readonly O[],
  run: (ctx: Context, args: Args<O>) => Promise<number>,
): Command<O> {
  return { options, run };
}
