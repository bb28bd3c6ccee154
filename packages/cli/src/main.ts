import { argsOf, parseCommandLine } from './args.js';
import { contextOf } from './context.js';
import { dispatch } from './dispatch.js';
import { exitCodes } from './exit-codes.js';
import { USAGE } from './usage.js';
import { UsageError, usageLine } from './usage-error.js';

/** Runs `cq` with `argv` (the arguments after the program), writing lines to `out`; resolves with the exit code. */
export async function main(
  argv: string[],
  out: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Promise<number> {
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(usageLine(err));
    return exitCodes.usage;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !values.help ? exitCodes.usage : exitCodes.ok;
  }
  return await dispatch(contextOf(values, out), argsOf(command, rest, values));
}
