import type { StreamedEvent } from '@cq/client';
import { NoWebhookError } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { until } from '../support/processes.js';
import { startSystem } from '../support/system.js';
import { signatureValid, startReceiver, type Received, deliveryQueueIdle } from '../support/webhook-receiver.js';
import { cleanUp } from '@cq/test-harness';

describe('webhooks end to end (a real receiver on 127.0.0.1, WEBHOOK_ALLOW_PRIVATE=true)', async () => {
  const system = await startSystem({ apiEnv: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
  const { client } = system;
  const receiver = await startReceiver({
    '/flaky': (attempt) => (attempt <= 2 ? 500 : 200),
    '/hang': (attempt) => (attempt === 1 ? 'hang' : 200),
    '/down': () => 503,
  });
  cleanUp(() => receiver.close());

  /** Every event of `userId`'s next session on the global stream (with SSE ids), until its ending. */
  async function followed(userId: string): Promise<{ opened: Promise<void>; events: Promise<StreamedEvent[]> }> {
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const stream = client.events({ onOpen: () => opened() });
    const events = (async () => {
      const mine: StreamedEvent[] = [];
      for await (const event of stream) {
        if (event.type === 'error' || event.userId !== userId) continue;
        mine.push(event);
        if (['completed', 'failed', 'expired', 'stopped', 'lost'].includes(event.type)) break;
      }
      return mine;
    })();
    return { opened: open, events };
  }

  const redis = system.connect();
  cleanUp(() => redis.disconnect());
  const queueIdle = (): Promise<boolean> => deliveryQueueIdle(redis, system.keyPrefix);

  const ofSession = (requests: Received[], sessionId: string): Received[] =>
    requests.filter((r) => (JSON.parse(r.body) as { sessionId: string }).sessionId === sessionId);

  it('pending, running, ready and completed each reach the receiver once, signed, with the event id as webhook-id; a webhook for completed gets only that', async () => {
    const all = await client.createWebhook(`${receiver.url}/all`);
    const ended = await client.createWebhook(`${receiver.url}/completed`, ['completed']);
    expect(all.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(await client.webhooks()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: all.id, events: [] }),
        expect.objectContaining({ id: ended.id, events: ['completed'] }),
      ]),
    );
    const stream = await followed('hook-ann');
    await stream.opened;
    const admission = await client.spawn(
      (await client.issueToken({ userId: 'hook-ann', metadata: { readyAfterMs: 200, durationMs: 800 } })).token,
    );
    const events = await stream.events;
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'ready', 'completed']);
    await until(() => ofSession(receiver.at('/all'), admission.sessionId).length >= 4, 15_000, 'four deliveries');
    await until(
      () => ofSession(receiver.at('/completed'), admission.sessionId).length >= 1,
      15_000,
      'the completed one',
    );
    // Nothing more to come: the queue has nothing left for them.
    await until(queueIdle, 15_000, 'the delivery queue idle');
    // Deliveries run side by side, so they may arrive in any order: matched to the events by webhook-id.
    const got = ofSession(receiver.at('/all'), admission.sessionId);
    expect(got).toHaveLength(4);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(
      new Set(events.map((e) => (e as { id?: string }).id)),
    );
    for (const request of got) {
      const event = events.find((e) => (e as { id?: string }).id === request.headers['webhook-id']) as StreamedEvent & {
        id: string;
      };
      expect(request.headers['webhook-id']).toBe(event.id);
      expect(JSON.parse(request.body)).toEqual(Object.fromEntries(Object.entries(event).filter(([k]) => k !== 'id')));
      expect(request.headers['content-type']).toMatch(/^application\/json/);
      expect(signatureValid(all.secret, request)).toBe(true);
      expect(signatureValid(ended.secret, request)).toBe(false);
      expect(Math.abs(Number(request.headers['webhook-timestamp']) * 1000 - request.at)).toBeLessThan(5000);
    }
    const completed = ofSession(receiver.at('/completed'), admission.sessionId);
    expect(completed.map((r) => JSON.parse(r.body).type)).toEqual(['completed']);
    expect(signatureValid(ended.secret, completed[0]!)).toBe(true);
    for (const id of [all.id, ended.id]) await client.deleteWebhook(id);
  });

  it('a receiver that answers 500 twice, then 200, gets the event three times with one webhook-id, the first retry within 10 s; the log shows each attempt', async () => {
    const hook = await client.createWebhook(`${receiver.url}/flaky`, ['completed']);
    const admission = await client.spawn(
      (await client.issueToken({ userId: 'hook-flaky', metadata: { durationMs: 100 } })).token,
    );
    await until(() => ofSession(receiver.at('/flaky'), admission.sessionId).length === 3, 40_000, 'three attempts');
    const got = ofSession(receiver.at('/flaky'), admission.sessionId);
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(got.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(got[1]!.at - got[0]!.at).toBeLessThan(10_000);
    for (const request of got) expect(signatureValid(hook.secret, request)).toBe(true);
    const log = await client.deliveries(hook.id);
    expect(log.map((a) => [a.attempt, a.status])).toEqual([
      [3, 200],
      [2, 500],
      [1, 500],
    ]);
    expect(log[0]!.nextAttemptAt).toBeUndefined();
    expect(Date.parse(log[2]!.nextAttemptAt!)).toBeGreaterThan(Date.parse(log[2]!.at));
    await client.deleteWebhook(hook.id);
  }, 60_000);

  it('a receiver that hangs is given up on after 10 s and retried; the log says it timed out', async () => {
    const hook = await client.createWebhook(`${receiver.url}/hang`, ['completed']);
    const admission = await client.spawn(
      (await client.issueToken({ userId: 'hook-hang', metadata: { durationMs: 100 } })).token,
    );
    // At least the retry (on a starved machine the retry may time out too, and a third come).
    await until(() => ofSession(receiver.at('/hang'), admission.sessionId).length >= 2, 40_000, 'the retry');
    const got = ofSession(receiver.at('/hang'), admission.sessionId);
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(10_000);
    await until(
      async () => (await client.deliveries(hook.id)).some((a) => a.status === 200),
      30_000,
      'the delivered attempt logged',
    );
    const log = await client.deliveries(hook.id);
    const first = log.find((a) => a.attempt === 1)!;
    expect(first.error).toMatch(/timed out/);
    expect(first.status).toBeUndefined();
    expect(log[0]).toMatchObject({ status: 200 });
    expect(log[0]!.attempt).toBeGreaterThanOrEqual(2);
    await client.deleteWebhook(hook.id);
  }, 60_000);

  it('deleting a webhook stops its deliveries, pending retries included; its secret is not in Redis in plain text', async () => {
    const hook = await client.createWebhook(`${receiver.url}/down`, ['completed']);
    const redis = system.connect();
    cleanUp(() => redis.disconnect());
    const admission = await client.spawn(
      (await client.issueToken({ userId: 'hook-gone', metadata: { durationMs: 100 } })).token,
    );
    await until(() => ofSession(receiver.at('/down'), admission.sessionId).length === 1, 20_000, 'the first attempt');
    // Every value under the prefix, as a dump would show it: the secret is not among them.
    const keys = await redis.keys(`${system.keyPrefix}:*`);
    expect(keys.length).toBeGreaterThan(0);
    const secretBody = hook.secret.replace(/^whsec_/, '');
    for (const key of keys) {
      const dumped = await redis.dumpBuffer(key);
      expect(dumped?.toString('latin1').includes(secretBody) ?? false, key).toBe(false);
    }
    await client.deleteWebhook(hook.id);
    await expect(client.deliveries(hook.id)).rejects.toBeInstanceOf(NoWebhookError);
    await expect(client.deleteWebhook(hook.id)).rejects.toBeInstanceOf(NoWebhookError);
    // Its retry comes up 5 s after the first attempt, finds the webhook gone and is dropped: the queue
    // empties with no second request.
    await until(queueIdle, 20_000, 'the pending retry dropped');
    expect(ofSession(receiver.at('/down'), admission.sessionId)).toHaveLength(1);
  }, 60_000);
});
