import {
  CoordinatorClient,
  SessionEndedError,
  SessionExistsError,
  TimeoutError,
  type OutputLineData,
  type StreamedEvent,
} from '@cq/client';
import { describe, expect, it, onTestFinished } from 'vitest';
import { allLines, spawnWith } from '../support/output.js';
import { until } from '../support/processes.js';
import { collect } from '../support/streams.js';
import { API_KEY, startSystem } from '../support/system.js';

const idsOf = (events: StreamedEvent[]): string[] => events.flatMap((e) => (e.type === 'error' ? [] : [e.id!]));

describe("the client's streams across an API process that is SIGKILLed and started again", async () => {
  const system = await startSystem({ workers: 1 });
  const port = new URL(system.api.baseUrl).port;
  // A client of its own, told to keep reconnecting long enough for the API to come back.
  const client = new CoordinatorClient({ baseUrl: system.api.baseUrl, apiKey: API_KEY, reconnectForMs: 30_000 });

  it("every session event, a user's events and a session's output: each reader goes on by itself, every item once", async () => {
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    let opens = 0;
    const everyone = collect(client.events({ signal: stop.signal, onOpen: () => opens++ }));
    const user = collect(client.events({ userId: 'cl-restart', onOpen: () => opens++ }));
    await until(() => opens === 2, 10_000, 'both event streams open');
    const { sessionId } = await spawnWith(system, 'cl-restart', { tickEveryMs: 100, durationMs: 6000 });
    await until(() => user.items.some((e) => e.type === 'running'), 15_000, 'running');
    const output = collect(client.followLogs('cl-restart', sessionId));
    await until(() => output.items.filter((l) => l.line.startsWith('tick ')).length >= 5, 10_000, 'ticks');

    // The API process dies with no chance to close anything; another starts on the same address.
    expect(await system.api.stop('SIGKILL')).toBe(null);
    const ticksAtKill = output.items.length;
    const restarted = await system.addApi({ PORT: port });
    onTestFinished(async () => {
      await restarted.stop();
    });

    // The session runs on (its host needs no API) and ends; every reader ends or goes on by itself.
    await Promise.all([user.done, output.done]);
    expect(user.error()).toBeUndefined();
    expect(output.error()).toBeUndefined();
    expect(output.items.length).toBeGreaterThan(ticksAtKill);
    // The user's stream: each state once, in order, ending with the session's end.
    expect(user.items.map((e) => e.type)).toEqual(['pending', 'running', 'completed']);
    // The output: every kept line once, in order.
    const kept = await allLines(client, 'cl-restart', sessionId);
    expect(output.items.map((l: OutputLineData) => l.id)).toEqual(kept.map((l) => l.id));
    // Every session's events: this session's three, each once, though the stream broke in between.
    await until(
      () => everyone.items.some((e) => e.type === 'completed' && e.sessionId === sessionId),
      10_000,
      'the end, on the stream of every event',
    );
    const ours = everyone.items.filter((e) => e.type !== 'error' && e.sessionId === sessionId);
    expect(ours.map((e) => e.type)).toEqual(['pending', 'running', 'completed']);
    expect(new Set(idsOf(everyone.items)).size).toBe(idsOf(everyone.items).length);
    stop.abort();
    await everyone.done;
    expect(everyone.error()).toBeUndefined();
  });
});

describe('one call to a running session: start(), and the handle', async () => {
  const system = await startSystem({ workers: 1 });
  const client = new CoordinatorClient({ baseUrl: system.api.baseUrl, apiKey: API_KEY });

  it('start() resolves once the session runs (or is ready); the handle reads its output, changes its lifetime, stops it and waits for its end', async () => {
    const session = await client.start({
      userId: 'cl-start',
      metadata: { tickEveryMs: 100, readyAfterMs: 200, endpoint: 'cl:1' },
      waitFor: 'ready',
    });
    expect(session.endpoint).toBe('cl:1');
    expect(session.snapshot.state).toBe('ready');
    expect((await client.getSession('cl-start')).sessionId).toBe(session.sessionId);
    await until(async () => (await session.logs()).lines.length > 2, 10_000, 'output');
    const changed = await session.setLifetime(120_000);
    expect(Date.parse(changed.deadline!) - Date.now()).toBeGreaterThan(100_000);
    await session.recordActivity();
    expect((await session.stop()).state).toBe('stopping');
    const ended = await session.wait({ timeoutMs: 15_000 });
    expect(ended).toMatchObject({ sessionId: session.sessionId, state: 'stopped' });
    // Once ended, a call naming it never touches the user's next session.
    await expect(session.stop()).rejects.toMatchObject({ code: 'session_mismatch' });
  });

  it('rejects with the typed refusal, with SessionEndedError when it ends first, and with TimeoutError (stopping it) after timeoutMs', async () => {
    const first = await client.start({ userId: 'cl-refused' });
    await expect(client.start({ userId: 'cl-refused' })).rejects.toBeInstanceOf(SessionExistsError);
    await first.stop();
    await first.wait({ timeoutMs: 15_000 });

    // Exits 3 at once, before it could be ready.
    const failed = client.start({ userId: 'cl-fails', metadata: { exitCode: 3, durationMs: 0 }, waitFor: 'ready' });
    await expect(failed).rejects.toBeInstanceOf(SessionEndedError);
    await expect(failed).rejects.toMatchObject({ state: 'failed', exitCode: 3 });

    // Never ready (it announces nothing): given up after 1.5 s, and stopped (the stop reaches the host at
    // once, so the session may have ended before the rejection is seen: its history says how it ended).
    const late = client.start({ userId: 'cl-late', waitFor: 'ready', timeoutMs: 1500 });
    await expect(late).rejects.toBeInstanceOf(TimeoutError);
    await until(async () => (await client.history('cl-late')).length === 1, 15_000, "cl-late's session ended");
    expect((await client.history('cl-late'))[0]).toMatchObject({ state: 'stopped' });
  });

  it('takes CQ_API_URL and CQ_API_KEY from the environment', async () => {
    process.env['CQ_API_URL'] = system.api.baseUrl;
    process.env['CQ_API_KEY'] = API_KEY;
    try {
      const fromEnv = new CoordinatorClient();
      expect(fromEnv.baseUrl).toBe(system.api.baseUrl);
      expect((await fromEnv.whoami()).name).toBe('key-1');
    } finally {
      delete process.env['CQ_API_URL'];
      delete process.env['CQ_API_KEY'];
    }
  });
});
