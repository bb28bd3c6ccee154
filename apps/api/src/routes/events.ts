import {
  EVENT_RETENTION_MS,
  type EventPosition,
  parseEventId,
  type EventSubscription,
  type SessionEvent,
  type UserStream,
} from '@cq/coordinator';
import { errorSchema, noQuery, userParams } from '@cq/contract';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { wire } from '../event-wire.js';
import { HttpError } from '../http-errors.js';
import { iso } from '../iso.js';

/** A comment line this often keeps an idle stream open through proxies that close quiet connections. */
export const SSE_HEARTBEAT_MS = 15_000;

/** How far ahead of this server's clock a `Last-Event-ID` may be (clocks of Redis and API differ a little). */
export const EVENT_ID_CLOCK_SKEW_MS = 60_000;

/**
 * The position after a `Last-Event-ID`, or undefined without one; 400 for an id this API did not give
 * out: malformed, or of a moment beyond now + {@link EVENT_ID_CLOCK_SKEW_MS} (which would stream nothing
 * until then). The message does not repeat the header.
 */
export function resumePosition(lastEventId: string | undefined): EventPosition | undefined {
  if (lastEventId === undefined) return undefined;
  const after = parseEventId(lastEventId);
  if (after === undefined)
    throw new HttpError(
      'invalid_request',
      'Last-Event-ID is not an event id of this API (<ms>-<seq>-<slot>); reconnect without it to read from now on.',
    );
  if (after.ms > Date.now() + EVENT_ID_CLOCK_SKEW_MS)
    throw new HttpError(
      'invalid_request',
      `Last-Event-ID names a moment more than ${EVENT_ID_CLOCK_SKEW_MS / 1000} s in the future, so no event ` +
        'has it; reconnect without it to read from now on.',
    );
  return after;
}

/** The 200 of both routes: a stream, not JSON (error answers stay JSON). */
const eventStream = {
  description: 'Server-sent events: `event: <type>`, `data: <JSON>` (see docs/http-api.md, "Event streams")',
  content: { 'text/event-stream': { schema: z.string() } },
} as const;
export const lastEventIdHeader = z.object({
  'last-event-id': z.string().max(64).optional().describe('Resume after this event id (EventSource sends it)'),
});

/**
 * Starts the stream: headers out at once (a reader learns it is connected before the first event), and
 * the subscription's end tied to the connection's. A reader that fell behind is cut off: it cannot be
 * told on a socket it does not read, and it resumes from its last event's id.
 */
export function openStream(reply: FastifyReply, subscription: EventSubscription | UserStream): void {
  reply.sse.onClose(() => subscription.close());
  reply.raw.once('close', () => subscription.close());
  // Ended by the feed (shutdown): a stream still waiting on a full socket is cut, so SIGTERM is not held.
  subscription.onEnd((failure) => {
    if (failure === undefined && reply.raw.writableNeedDrain) reply.raw.destroy();
  });
  subscription.onEnd((failure) => {
    if (failure !== undefined) {
      reply.log.info({ reason: failure.message }, 'event stream reader too slow; disconnected');
      reply.raw.destroy();
    }
  });
  reply.sse.keepAlive();
  reply.sse.sendHeaders();
  reply.raw.flushHeaders();
}

/**
 * Sends `first` (events the reader has not seen, older than any of the subscription's), then every
 * event of `subscription`, each with its id, until the subscription or the connection ends, then ends
 * the response. A reader that went away, or fell behind, ends its own stream only.
 */
export async function streamEvents(
  reply: FastifyReply,
  subscription: EventSubscription,
  first: readonly SessionEvent[] = [],
): Promise<void> {
  try {
    for (const event of first)
      if (!(await send(reply, { id: event.id, event: event.type, data: wire(event) }))) {
        reply.sse.close();
        return;
      }
    for await (const event of subscription)
      if (!(await send(reply, { id: event.id, event: event.type, data: wire(event) }))) break;
  } catch (err) {
    reply.log.info({ err }, 'event stream ended');
  }
  reply.sse.close();
}

const closedReplies = new WeakMap<FastifyReply, Promise<false>>();

/**
 * Sends one event; false once the connection is gone. A write waiting for a full socket to drain
 * gives up when the socket closes (@fastify/sse's own wait would not: it listens for drain or error).
 */
export async function send(
  reply: FastifyReply,
  message: { id?: string; event: string; data: string },
): Promise<boolean> {
  if (!reply.sse.isConnected || reply.raw.destroyed) return false;
  let closed = closedReplies.get(reply);
  if (closed === undefined) {
    closed = new Promise<false>((resolve) => reply.raw.once('close', () => resolve(false)));
    closedReplies.set(reply, closed);
  }
  return Promise.race([reply.sse.send(message).then(() => true), closed]);
}

/** Session events as server-sent events: every session's (`/v1/events`), or one user's. */
export const eventRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/v1/events',
    {
      config: { scope: 'sessions:read' },
      sse: { kind: 'manual' },
      schema: {
        summary: 'Every session event of every user, as server-sent events with ids (resume with Last-Event-ID)',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        headers: lastEventIdHeader,
        response: { 200: eventStream, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const lastEventId = request.headers['last-event-id'];
      const after = resumePosition(lastEventId);
      const subscription = await app.events.subscribe(after === undefined ? {} : { after });
      openStream(reply, subscription);
      if (subscription.expired)
        await reply.sse.send({
          event: 'error',
          data: JSON.stringify({
            code: 'events_expired',
            message:
              `Events before ${iso(Date.now() - EVENT_RETENTION_MS)} are no longer kept, so those after ` +
              `${lastEventId} cannot all be sent; the stream goes on from now. Read the sessions' state again.`,
          }),
        });
      await streamEvents(reply, subscription);
    },
  );

  app.get(
    '/v1/users/:userId/session/events',
    {
      config: { scope: 'sessions:read' },
      sse: { kind: 'manual' },
      schema: {
        summary: "The user's current or next session as server-sent events: its state, then each change, until it ends",
        description:
          'Every event has an id; a reader that reconnects with Last-Event-ID gets the events after it (not the ' +
          'current state again), so nothing is missed or sent twice across a reconnection.',
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: noQuery,
        headers: lastEventIdHeader,
        response: { 200: eventStream, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const after = resumePosition(request.headers['last-event-id']);
      const stream = await app.events.followUser(request.params.userId, after === undefined ? {} : { after });
      openStream(reply, stream);
      try {
        for await (const event of stream)
          if (!(await send(reply, { id: event.id, event: event.type, data: wire(event) }))) break;
      } catch (err) {
        request.log.info({ err }, 'event stream ended');
      } finally {
        stream.close();
        reply.sse.close();
      }
    },
  );
};
