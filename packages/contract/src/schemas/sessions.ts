// Sessions: a live one, its changes and stops, the ended ones of a user's history, one by its id, and the
// session list with its filters and its bulk stop.
import { labelsProblem } from '../labels.js';
import { MAX_LABELS, WORKER_ID_PATTERN, terminalReasons, terminalStates } from '../vocabulary.js';
import { z } from 'zod';
import { labelsPatchSchema, labelsSchema, poolSchema, positiveMs, sessionIdSchema, userIdSchema } from './common.js';

export const sessionView = z
  .object({
    sessionId: z.string(),
    userId: z.string(),
    fence: z.number().int(),
    state: z.enum(['pending', 'running', 'stopping']),
    pool: z.string().describe('The pool of worker hosts it runs on'),
    labels: z.record(z.string(), z.string()).describe('Its labels (changeable with PATCH)'),
    ready: z.boolean().describe('The session announced on SESSION_NOTIFY_FD that it is ready'),
    endpoint: z.string().optional().describe('Where it can be reached, as it announced (at most 512 characters)'),
    port: z
      .number()
      .int()
      .optional()
      .describe('The port the session proxy opens by default, as the session announced it (its readiness line)'),
    workerId: z.string().optional(),
    startedAt: z.string().optional(),
    leaseExpiresAt: z.string().optional(),
    deadline: z.string().optional(),
    idleTimeoutMs: z
      .number()
      .int()
      .optional()
      .describe('Stopped (reason idle) after this long without activity, ms; absent: never'),
    lastActivityAt: z
      .string()
      .optional()
      .describe('Running: its last activity (its start, a line on SESSION_NOTIFY_FD, POST .../activity), ISO-8601'),
  })
  .meta({ id: 'LiveSession' });

export const setLifetimeBody = z
  .object({
    lifetimeMs: positiveMs
      .optional()
      .describe(
        'Running: the session now ends this long from now (sooner or later than before), never after its ' +
          'start + MAX_LIFETIME_MS. Pending: its lifetime once started, at most MAX_LIFETIME_MS',
      ),
    labels: labelsPatchSchema.optional(),
  })
  .strict()
  .refine((body) => body.lifetimeMs !== undefined || body.labels !== undefined, {
    message: 'the body needs lifetimeMs or labels (or both)',
  })
  .meta({ id: 'UpdateSessionRequest' });

export const stopAccepted = z
  .object({
    sessionId: z.string(),
    userId: z.string(),
    state: z.enum(['stopping', 'stopped']),
  })
  .meta({ id: 'StopAccepted' });

/** A session that ended, as the user's history keeps it. */
export const endedSessionView = z
  .object({
    sessionId: z.string(),
    fence: z.number().int(),
    state: z.enum(terminalStates),
    reason: z
      .enum(terminalReasons)
      .optional()
      .describe(
        'Always for lost: a worker host had it and lost it (host_lost), no host claimed it within ' +
          'PENDING_TIMEOUT_MS (not_claimed), or Redis lost its records and its host stopped it (state_lost); ' +
          'for failed: its memory cap killed it (out_of_memory); for ' +
          'stopped: no activity for its idle timeout (idle)',
      ),
    workerId: z.string().optional(),
    startedAt: z.string().optional(),
    endedAt: z.string(),
    exitCode: z.number().int().optional(),
    pool: z.string(),
    labels: z.record(z.string(), z.string()).describe('Its labels when it ended'),
  })
  .meta({ id: 'EndedSession' });

export const historyView = z.object({ sessions: z.array(endedSessionView) }).meta({ id: 'History' });

/** A session by its id (`GET /v1/sessions/{sessionId}`): live as `GET .../session` shows it, or its history entry with `userId`. */
export const sessionByIdView = z
  .union([sessionView, endedSessionView.extend({ userId: z.string() })])
  .meta({ id: 'SessionById' });

export const sessionIdParams = z.object({ sessionId: sessionIdSchema }).strict();

/** A `label` filter: `key=value`. */
const labelFilter = z
  .string()
  .regex(/^[^=]+=/, 'must be key=value')
  .superRefine((text, ctx) => {
    const at = text.indexOf('=');
    const problem = labelsProblem({ [text.slice(0, at)]: text.slice(at + 1) });
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });

/** The filters of the session list and of its bulk stop. */
const listFilters = {
  state: z.enum(['pending', 'running', 'stopping']).optional().describe('Only sessions in this state'),
  pool: poolSchema.optional().describe('Only sessions of this pool'),
  workerId: z
    .string()
    .regex(WORKER_ID_PATTERN, 'must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -')
    .optional()
    .describe('Only sessions this worker host runs'),
  userId: userIdSchema.optional().describe("Only this user's session"),
};

export const listSessionsQuery = z
  .object({
    ...listFilters,
    label: z
      .union([labelFilter, z.array(labelFilter).max(MAX_LABELS, `at most ${MAX_LABELS} label filters`)])
      .optional()
      .describe('key=value; repeat it for more: every one must match'),
    limit: z.coerce
      .number()
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(500, 'must be at most 500')
      .default(100)
      .describe('Most sessions in the page (1 to 500)'),
    cursor: z.string().max(2048).optional().describe("The previous page's next"),
  })
  .strict();

export const sessionsPage = z
  .object({
    sessions: z.array(sessionView),
    next: z
      .string()
      .optional()
      .describe(
        'The cursor of the next page; absent on the last one. A page may hold fewer sessions than limit ' +
          '(even none) and still have a next: follow it to the end',
      ),
  })
  .meta({ id: 'SessionsPage' });

export const bulkStopBody = z
  .object({ ...listFilters, labels: labelsSchema.optional().describe('Labels every session must carry') })
  .strict()
  .refine((body) => Object.values(body).some((value) => value !== undefined), {
    message: 'name at least one filter (state, pool, workerId, userId, labels)',
  })
  .meta({ id: 'BulkStopRequest' });

export const bulkStopAccepted = z
  .object({
    matched: z.number().int().describe('Live sessions that matched'),
    stopping: z.number().int().describe('Of those, how many are now stopping or stopped'),
    more: z.boolean().describe('True when further sessions may match: call again'),
  })
  .meta({ id: 'BulkStopAccepted' });
