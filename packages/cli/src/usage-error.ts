/** The command line is wrong: one line names the mistake and points at `cq --help`; the exit code is `usage`. */
export class UsageError extends Error {}

/** What a usage error prints: `cq: <the mistake>; run cq --help`. */
export function usageLine(err: UsageError): string {
  return `cq: ${err.message}; run cq --help\n`;
}
