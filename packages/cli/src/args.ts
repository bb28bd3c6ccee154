import { parseArgs } from 'node:util';
import { UsageError } from './usage-error.js';

/** Parses the command line; throws parseArgs' own error for an unknown option or a missing value. */
export function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      json: { type: 'boolean', default: false },
      metadata: { type: 'string' },
      ttl: { type: 'string' },
      lifetime: { type: 'string' },
      idle: { type: 'string' },
      user: { type: 'string' },
      users: { type: 'string' },
      follow: { type: 'boolean', short: 'f', default: false },
      events: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

/** The options of a parsed command line. */
export type Options = ReturnType<typeof parseCommandLine>['values'];

/** What a command is called with. */
export interface Args {
  /** The command's name, as typed. */
  readonly command: string;
  /** The positional arguments after the command's name. */
  readonly positionals: readonly string[];
  readonly options: Options;
  /** The first positional argument; a usage error saying the command needs `what` when there is none. */
  need(what: string): string;
}

export function argsOf(command: string, positionals: readonly string[], options: Options): Args {
  return {
    command,
    positionals,
    options,
    need: (what) => {
      const argument = positionals[0];
      if (argument === undefined) throw new UsageError(`${command} needs ${what}`);
      return argument;
    },
  };
}

export function parseIntOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number of milliseconds (got "${value}")`);
  return Number(value);
}

export function parseMetadata(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new UsageError(`--metadata must be a JSON object (got ${value})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UsageError('--metadata must be a JSON object');
  return parsed as Record<string, unknown>;
}
