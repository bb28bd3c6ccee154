import { ApiError, UnavailableError, type StreamedEvent } from '@cq/client';
import { isFinalEventType } from '@cq/contract';
import { escaped } from '../escape.js';
import { endingWords, eventWords, sessionOpening } from '../format.js';
import { command } from './command.js';

/** One session event as `events` prints it: `<at> ann: running, fence 3, session s-1, on host-1, pool default`. */
function describeEvent(e: Exclude<StreamedEvent, { type: 'error' }>): string {
  const words =
    isFinalEventType(e.type) && e.type !== 'withdrawn' ? endingWords({ ...e, state: e.type }) : eventWords(e.type);
  const parts = sessionOpening({ ...e, words });
  parts.push(escaped`pool ${e.pool}`);
  return escaped`${e.at} ` + parts.join(', ');
}

/**
 * `events [--after ID]`: every session event of every user as it happens (`GET /v1/events`), from now
 * or, with `--after`, from just after that event id, until interrupted. When the stream breaks for good
 * (the API gone longer than the client keeps reconnecting), `events` says which id to resume after and
 * exits 8.
 */
export const events = command(['after'], async (ctx, { options }) => {
  let last = options.after;
  const closed = (): UnavailableError =>
    new UnavailableError(
      0,
      'stream_closed',
      last === undefined
        ? 'The event stream closed; run cq events again.'
        : `The event stream closed; resume with cq events --after ${last}.`,
      undefined,
    );
  try {
    const opened = (): void => {
      if (!ctx.json)
        process.stderr.write('cq: the event stream is open; each event prints as it happens (Ctrl-C stops)\n');
    };
    for await (const event of ctx.client.events({
      ...(last === undefined ? {} : { lastEventId: last }),
      onOpen: opened,
    })) {
      if (event.type === 'error') {
        // The stream goes on (e.g. events_expired: from now on; the events in between are no longer kept).
        if (ctx.json) ctx.out(JSON.stringify(event));
        else process.stderr.write(escaped`cq: ${event.code}: ${event.message}\n`);
        continue;
      }
      if (event.id !== undefined) last = event.id;
      ctx.out(ctx.json ? JSON.stringify(event) : describeEvent(event));
    }
  } catch (err) {
    throw err instanceof ApiError && err.code === 'stream_closed' ? closed() : err;
  }
  throw closed();
});
