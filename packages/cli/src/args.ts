import { parseArgs } from 'node:util';
import { UsageError } from './usage-error.js';

/**
 * Every option `cq` knows. A command takes the global ones ({@link globalOptions}) and those it declares
 * (`commands/index.ts`); dispatch refuses any other. No defaults: an option absent from the parsed
 * values was not given.
 */
export const knownOptions = {
  url: { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
  metadata: { type: 'string' },
  ttl: { type: 'string' },
  lifetime: { type: 'string' },
  idle: { type: 'string' },
  user: { type: 'string' },
  users: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  events: { type: 'string' },
  label: { type: 'string', multiple: true },
  pool: { type: 'string' },
  state: { type: 'string' },
  worker: { type: 'string' },
  limit: { type: 'string' },
  session: { type: 'string' },
  next: { type: 'boolean' },
  after: { type: 'string' },
  port: { type: 'string' },
  browser: { type: 'boolean' },
  interactive: { type: 'boolean', short: 'i' },
  tty: { type: 'boolean', short: 't' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The name of an option `cq` knows. */
export type OptionName = keyof typeof knownOptions;

/** The options every command takes. */
export const globalOptions = ['url', 'key', 'json', 'help'] as const satisfies readonly OptionName[];

export type GlobalOption = (typeof globalOptions)[number];

/** An option only the commands that declare it take. */
export type CommandOption = Exclude<OptionName, GlobalOption>;

export function isGlobalOption(name: string): name is GlobalOption {
  return (globalOptions as readonly string[]).includes(name);
}

/**
 * Parses the command line; throws a {@link UsageError} naming the option at fault (unknown, missing
 * its value, or given one it does not take) rather than parseArgs' own text.
 */
export function parseCommandLine(argv: string[]) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: knownOptions });
  } catch (err) {
    throw new UsageError(optionMistake(argv) ?? (err as Error).message);
  }
}

/** The first option of `argv` that strict parsing refuses, in a few words; undefined when none is found. */
function optionMistake(argv: string[]): string | undefined {
  const { tokens } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    tokens: true,
    options: knownOptions,
  });
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    if (!Object.hasOwn(knownOptions, token.name)) return `unknown option ${token.rawName}`;
    const option = knownOptions[token.name as keyof typeof knownOptions];
    // A value that looks like an option (`--url --json`) is refused by strict parsing as ambiguous.
    const missing = token.value === undefined || (!token.inlineValue && token.value.startsWith('-'));
    if (option.type === 'string' && missing) return `${token.rawName} needs a value`;
    if (option.type === 'boolean' && token.value !== undefined) return `${token.rawName} takes no value`;
  }
  return undefined;
}

/** The options of a parsed command line. */
export type Options = ReturnType<typeof parseCommandLine>['values'];

/** What a command that takes the options `O` (beside the global ones) is called with. */
export interface Args<O extends CommandOption = CommandOption> {
  /** The command's name, as typed. */
  readonly command: string;
  /** The positional arguments after the command's name. */
  readonly positionals: readonly string[];
  /** The options given: only those the command takes. */
  readonly options: Pick<Options, O | GlobalOption>;
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

/** `--label k=v` options as labels; a usage error naming the one without `=`. */
export function parseLabels(values: readonly string[] | undefined): Record<string, string> | undefined {
  if (values === undefined || values.length === 0) return undefined;
  const labels: Record<string, string> = {};
  for (const pair of values) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`--label must be key=value (got "${pair}")`);
    labels[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return labels;
}

/** The session list's filters from `--state`, `--pool`, `--worker`, `--user` and `--label`. */
export function parseListFilter(options: Pick<Options, 'state' | 'pool' | 'worker' | 'user' | 'label'>): {
  state?: 'pending' | 'running' | 'stopping';
  pool?: string;
  workerId?: string;
  userId?: string;
  labels?: Record<string, string>;
} {
  const state = options.state;
  if (state !== undefined && state !== 'pending' && state !== 'running' && state !== 'stopping')
    throw new UsageError(`--state must be pending, running or stopping (got "${state}")`);
  const labels = parseLabels(options.label);
  return {
    ...(state === undefined ? {} : { state }),
    ...(options.pool === undefined ? {} : { pool: options.pool }),
    ...(options.worker === undefined ? {} : { workerId: options.worker }),
    ...(options.user === undefined ? {} : { userId: options.user }),
    ...(labels === undefined ? {} : { labels }),
  };
}

/** `--session ID` as the precondition of a call that changes a user's session: it acts only on that session. */
export function parseSessionMatch(options: Pick<Options, 'session'>): { sessionId?: string } {
  return options.session === undefined ? {} : { sessionId: options.session };
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
