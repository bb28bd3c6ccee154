import type { Command } from './command.js';
import { demo } from './demo.js';
import { events } from './events.js';
import { cp, exec } from './exec.js';
import { history } from './history.js';
import { drain, hosts, pools } from './hosts.js';
import { logs } from './logs.js';
import { forward, open } from './proxy.js';
import { activity, extend, labels, ls, session, status, stop } from './session.js';
import { spawn } from './spawn.js';
import { token } from './token.js';
import { watch } from './watch.js';
import { webhooks } from './webhooks.js';
import { whoami } from './whoami.js';

export type { Command } from './command.js';

/**
 * Every command by the name it is typed as (`help` is answered before a command runs), each with the
 * options it takes beside the global ones: the help text (usage.ts) names the same, as a test checks.
 */
export const commands: ReadonlyMap<string, Command> = new Map<string, Command>([
  ['token', token],
  ['spawn', spawn],
  ['status', status],
  ['extend', extend],
  ['labels', labels],
  ['activity', activity],
  ['stop', stop],
  ['ls', ls],
  ['session', session],
  ['history', history],
  ['logs', logs],
  ['watch', watch],
  ['events', events],
  ['hosts', hosts],
  ['pools', pools],
  ['drain', drain],
  ['demo', demo],
  ['webhooks', webhooks],
  ['whoami', whoami],
  ['open', open],
  ['forward', forward],
  ['exec', exec],
  ['cp', cp],
]);
