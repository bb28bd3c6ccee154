import type { OutputLine } from '@cq/coordinator';
import {
  LINE_ID_PATTERN,
  errorSchema,
  sessionLogParams,
  sessionLogQuery,
  sessionLogs,
  type OutputEndData,
  type OutputLineData,
} from '@cq/contract';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HttpError } from '../http-errors.js';
import { iso } from '../iso.js';
import { lastEventIdHeader, send } from './events.js';

/** The wire form of a line. */
function wire(line: OutputLine): OutputLineData {
  return { id: line.id, at: iso(line.at), stream: line.stream, line: line.line };
}

function notKept(userId: string, sessionId: string): HttpError {
  return new HttpError(
    'no_session',
    `User ${userId} has no session ${sessionId} whose output is kept (unknown, another user's, or past LOG_RETENTION_MS).`,
  );
}

/** A session's output (service key): a page as JSON, or followed as server-sent events. */
export const logRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/v1/users/:userId/sessions/:sessionId/logs',
    {
      config: { scope: 'sessions:read' },
      sse: { kind: 'dual' },
      schema: {
        summary:
          "A session's kept output, oldest first (running or ended, within LOG_RETENTION_MS); with " +
          '`Accept: text/event-stream`, each line as an SSE `line` event, then new ones until `end`',
        security: [{ serviceKey: [] }],
        params: sessionLogParams,
        querystring: sessionLogQuery,
        headers: lastEventIdHeader,
        response: {
          200: {
            description: 'A page of lines (JSON), or the lines as server-sent events (`line` with an id, then `end`)',
            content: {
              'application/json': { schema: sessionLogs },
              'text/event-stream': { schema: z.string() },
            },
          },
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
          503: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const { userId, sessionId } = request.params;
      if (reply.sse === undefined) {
        const page = await app.coordinator.output.read(userId, sessionId, {
          after: request.query.after,
          limit: request.query.limit,
        });
        if (page === undefined) throw notKept(userId, sessionId);
        return { lines: page.lines.map(wire), droppedBytes: page.droppedBytes, more: page.more };
      }

      const lastEventId = request.headers['last-event-id'];
      if (lastEventId !== undefined && !LINE_ID_PATTERN.test(lastEventId))
        throw new HttpError(
          'invalid_request',
          'Last-Event-ID is not a line id of this API (<ms>-<seq>); reconnect without it to read from the oldest kept line.',
        );
      const follower = await app.output.follow(userId, sessionId, lastEventId ?? request.query.after);
      if (follower === undefined) throw notKept(userId, sessionId);
      reply.sse.onClose(() => follower.close());
      reply.raw.once('close', () => follower.close());
      reply.sse.keepAlive();
      reply.sse.sendHeaders();
      reply.raw.flushHeaders();
      try {
        for await (const line of follower)
          if (!(await send(reply, { id: line.id, event: 'line', data: JSON.stringify(wire(line)) }))) break;
        if (follower.finished)
          await send(reply, { event: 'end', data: JSON.stringify({ sessionId } satisfies OutputEndData) });
      } catch (err) {
        request.log.info({ err }, 'output stream ended');
      } finally {
        follower.close();
        reply.sse.close();
      }
    },
  );
};
