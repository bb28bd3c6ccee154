// What a session's process is given: its program's parts on disk and its environment.
import { fileURLToPath } from 'node:url';
import type { SessionUser } from './containment.js';

/** The session runtime's program, built beside this module. */
export const runtimeProgram = fileURLToPath(new URL('./runtime-main.js', import.meta.url));
/** The built-in demo session: a POSIX shell script (see the contract). */
export const demoSessionPath = fileURLToPath(new URL('../bin/demo-session.sh', import.meta.url));

/**
 * The variables of the host's environment a session also gets; nothing else (no Redis credentials).
 * Not HOME (its SESSION_DIR is) nor TMPDIR (its /tmp is its own; the host's may be read-only to it).
 */
const PASSED_THROUGH = ['PATH', 'LANG', 'LC_ALL', 'TZ'];

/**
 * A session's whole environment: {@link PASSED_THROUGH} from the host's, its user's names (with
 * SESSION_USER), SESSION_DIR (also HOME), then the contract's variables (`sessionEnv`).
 */
export function sessionEnvironment(
  sessionEnv: Readonly<Record<string, string>>,
  user: SessionUser | undefined,
  dir: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED_THROUGH) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  if (user !== undefined) Object.assign(env, { USER: user.name, LOGNAME: user.name });
  return Object.assign(env, { SESSION_DIR: dir, HOME: dir }, sessionEnv);
}
