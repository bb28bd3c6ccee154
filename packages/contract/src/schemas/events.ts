// Session events: the data of the SSE events of `/v1/events` and of a user's session events, and of a
// stream's error event.
import { sessionEventTypes } from '../events.js';
import { terminalReasons } from '../vocabulary.js';
import { z } from 'zod';

/** The `data` of every SSE event of `/v1/events` and `/v1/users/{userId}/session/events`. */
export const sessionEventData = z
  .object({
    type: z
      .enum(sessionEventTypes)
      .describe('The state the session entered; withdrawn: its admission was rolled back (the spawn answered 503)'),
    sessionId: z.string(),
    userId: z.string(),
    fence: z.number().int(),
    at: z.string().describe('When the change happened (Redis time), ISO-8601'),
    workerId: z.string().optional(),
    endpoint: z.string().optional().describe('ready: where the session can be reached, as it announced'),
    port: z.number().int().optional().describe('ready: the port the session proxy opens by default, as it announced'),
    deadline: z.string().optional().describe('running: when the lifetime cap runs out'),
    lifetimeMs: z.number().int().optional().describe('pending: the lifetime it will have once started'),
    pool: z.string().describe("The session's pool"),
    labels: z.record(z.string(), z.string()).describe("The session's labels"),
    exitCode: z.number().int().optional(),
    reason: z
      .enum(terminalReasons)
      .optional()
      .describe(
        'Endings: why, where known (lost: host_lost, not_claimed or state_lost; failed: out_of_memory; stopped: idle)',
      ),
  })
  .meta({ id: 'SessionEventData' });

/** The `data` of an SSE `error` event: the stream cannot go on as asked (and says why). */
export const streamErrorData = z.object({ code: z.string(), message: z.string() }).meta({ id: 'StreamErrorData' });
