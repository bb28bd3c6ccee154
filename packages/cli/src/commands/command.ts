import type { Args } from '../args.js';
import type { Context } from '../context.js';

/** A command: runs against the API and resolves with the exit code. */
export type Command = (ctx: Context, args: Args) => Promise<number>;
