// Working inside a session: commands, terminals and files (the contract's "Working inside a session").
import { z } from 'zod';

/** Each of a command's outputs is kept to its first this many bytes. */
export const COMMAND_OUTPUT_MAX_BYTES = 1024 * 1024;
/** A command's time limit when it names none, ms. */
export const COMMAND_TIMEOUT_DEFAULT_MS = 60_000;

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name');

export const commandRequest = z
  .object({
    argv: z
      .array(z.string().max(65_536))
      .min(1)
      .max(4096)
      .describe('The program and its arguments (run as is, no shell: ["sh", "-c", "..."] for one)'),
    stdin: z
      .string()
      .max(1024 * 1024)
      .optional()
      .describe('Given to the command, then closed (empty when absent)'),
    env: z.record(envName, z.string().max(65_536)).optional().describe("Variables over the session's own environment"),
    cwd: z
      .string()
      .startsWith('/')
      .max(4096)
      .optional()
      .describe('The working directory as the session sees its files (default: its SESSION_DIR)'),
    timeoutMs: z
      .number()
      .int()
      .min(1)
      .max(24 * 3_600_000)
      .optional()
      .describe('Killed with its processes after this long (default 60000); the session’s end kills it sooner'),
  })
  .strict()
  .meta({ id: 'CommandRequest' });

export const commandResult = z
  .object({
    exitCode: z.number().int().describe('Its exit code; 128 + the signal’s number when a signal ended it'),
    signal: z.string().optional().describe('The signal that ended it (SIGKILL), if one did'),
    stdout: z.string().describe('Its standard output (UTF-8), the first 1 MiB'),
    stderr: z.string().describe('Its standard error (UTF-8), the first 1 MiB'),
    truncated: z.boolean().describe('Either output was longer than 1 MiB and was cut'),
  })
  .meta({ id: 'CommandResult' });

export const execQuery = z
  .object({
    argv: z
      .string()
      .max(262_144)
      .describe('The program and its arguments, a JSON array of strings (default ["/bin/sh"])')
      .optional(),
    tty: z.enum(['true', 'false']).optional().describe('Give it a terminal (stdout and stderr as one stream)'),
    cols: z.coerce.number().int().min(1).max(1000).optional().describe('The terminal’s width (default 80)'),
    rows: z.coerce.number().int().min(1).max(1000).optional().describe('The terminal’s height (default 24)'),
  })
  .strict();

export const filePathQuery = z
  .object({
    path: z
      .string()
      .startsWith('/', 'an absolute path, as the session sees its files')
      .max(4096)
      .refine((p) => !p.includes('\0'), 'no NUL byte')
      .describe('The file, as the session sees its files (absolute)'),
  })
  .strict();
