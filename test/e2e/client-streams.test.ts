import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoordinatorClient, UnavailableError } from '@cq/client';
import { describe, expect, it, onTestFinished } from 'vitest';
import { until } from '../support/processes.js';
import { collect } from '../support/streams.js';

// The client's streams against a local server that misbehaves on purpose: real sockets on 127.0.0.1, no
// API and no Redis. Each stream is judged by what the server sees: when it connects, and with which
// Last-Event-ID.

/** A short heartbeat interval, told to the client as the server's (the API's is 15 s). */
const HEARTBEAT_MS = 2000;

/** One request as the server saw it: when (performance.now()), and the id it resumes after. */
interface Arrival {
  at: number;
  lastEventId: string | undefined;
}

/** A server on 127.0.0.1 that answers the n-th request (from 1) with `answer`, and records each arrival. */
async function localServer(answer: (response: ServerResponse, n: number) => void) {
  const arrivals: Arrival[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  const server = createServer((request, response) => {
    const header = request.headers['last-event-id'];
    arrivals.push({ at: performance.now(), lastEventId: typeof header === 'string' ? header : undefined });
    for (const waiter of waiting) if (arrivals.length >= waiter.count) waiter.resolve();
    answer(response, arrivals.length);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals,
    /** Resolves once `count` requests have arrived. */
    arrival: (count: number) => new Promise<void>((resolve) => waiting.push({ count, resolve })),
  };
}

/** Headers of an event stream, sent at once (the client counts the stream as open from here). */
function openStream(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  response.flushHeaders();
}

const at = new Date().toISOString();
const streams = [
  {
    name: 'events()',
    open: (client: CoordinatorClient, signal: AbortSignal): AsyncIterable<unknown> => client.events({ signal }),
    event: (id: string) =>
      `id: ${id}\nevent: running\ndata: ${JSON.stringify({ type: 'running', sessionId: 's-1', userId: 'u-1', fence: 1, at })}\n\n`,
  },
  {
    name: 'followLogs()',
    open: (client: CoordinatorClient, signal: AbortSignal): AsyncIterable<unknown> =>
      client.followLogs('u-1', 's-1', { signal }),
    event: (id: string) =>
      `id: ${id}\nevent: line\ndata: ${JSON.stringify({ id, at, stream: 'stdout', line: 'tick' })}\n\n`,
  },
];

describe.each(streams)("the client's $name against a server that misbehaves", (stream) => {
  it('a connection gone silent (no event, no heartbeat) is reopened within 2.5 × the heartbeat after its last event, while heartbeats keep a quiet one open', async () => {
    let lastBeatWritten!: (at: number) => void;
    const silentSince = new Promise<number>((resolve) => (lastBeatWritten = resolve));
    const server = await localServer((response, n) => {
      openStream(response);
      if (n > 1) return; // the reconnection: open and quiet until the test ends
      response.write(stream.event('e-1'));
      // Three heartbeats (3 × the interval without an event), then nothing, the socket left open: what a
      // peer that vanished without a FIN or RST looks like to the client.
      let beats = 0;
      const timer = setInterval(() => {
        response.write(': heartbeat\n\n');
        if (++beats === 3) {
          clearInterval(timer);
          lastBeatWritten(performance.now());
        }
      }, HEARTBEAT_MS);
      response.once('close', () => clearInterval(timer));
    });
    const client = new CoordinatorClient({ baseUrl: server.baseUrl, heartbeatMs: HEARTBEAT_MS });
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    const reader = collect(stream.open(client, stop.signal));

    const silent = await silentSince;
    // Heartbeats alone, for longer than a silent stream is given, kept the first connection.
    expect(server.arrivals).toHaveLength(1);
    await until(() => server.arrivals.length >= 2, 2.5 * HEARTBEAT_MS, 'a second connection');
    const second = server.arrivals[1]!;
    expect(second.at - silent).toBeLessThanOrEqual(2.5 * HEARTBEAT_MS);
    expect(server.arrivals.map((a) => a.lastEventId)).toEqual([undefined, 'e-1']);

    stop.abort();
    await reader.done;
    expect(reader.error()).toBeUndefined();
    expect(reader.items).toHaveLength(1);
  });

  it('a server that answers and closes at once: given up with stream_closed after 5 such closes in a row, backing off between them; a stream that delivered an event starts the count again', async () => {
    // The 1st and 6th connections deliver one event and close; every other one closes at once.
    const server = await localServer((response, n) => {
      openStream(response);
      response.end(n === 1 || n === 6 ? stream.event(`e-${n}`) : undefined);
    });
    const client = new CoordinatorClient({ baseUrl: server.baseUrl });
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    const reader = collect(stream.open(client, stop.signal));

    // 1 + 4 empty + 1 + 5 empty = 11 connections; a 12th means the closes are not bounded.
    const unbounded = server.arrival(12).then(() => {
      throw new Error('a 12th connection: the reconnections are not bounded');
    });
    await Promise.race([reader.done, unbounded]);
    expect(reader.error()).toBeInstanceOf(UnavailableError);
    expect(reader.error()).toMatchObject({ code: 'stream_closed' });
    expect(reader.items).toHaveLength(2);
    expect(server.arrivals.map((a) => a.lastEventId)).toEqual([
      undefined,
      ...Array<string>(5).fill('e-1'),
      ...Array<string>(5).fill('e-6'),
    ]);
    // Backing off from 100 ms, doubling; from 100 ms again after the stream that delivered.
    const gaps = server.arrivals.slice(1).map((a, i) => a.at - server.arrivals[i]!.at);
    const backoff = [100, 200, 400, 800, 1600, 100, 200, 400, 800, 1600];
    for (const [i, ms] of backoff.entries()) expect(gaps[i], `wait before connection ${i + 2}`).toBeGreaterThan(ms - 1);
  });
});
