import { escaped } from './escape.js';

/** The command line is wrong: one line names the mistake and points at `cq --help`; the exit code is `usage`. */
export class UsageError extends Error {}

/** What a usage error prints: `cq: <the mistake>; run cq --help` (the mistake escaped: it quotes the arguments). */
export function usageLine(err: UsageError): string {
  return escaped`cq: ${err.message}; run cq --help\n`;
}
