import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Coordinator } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { cleanUp, deletePrefix, randomPrefix } from '@cq/test-harness';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { deliver, type DeliveryOutcome } from './deliverer.js';
import { type DeliveryJob } from './delivery-job.js';
import { SecretBox } from './secret-box.js';
import { webhookSecret } from './signature.js';

describe('a delivery whose 2xx cannot be recorded', async () => {
  const url = inject('redisUrl');
  const keyPrefix = randomPrefix();
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  const coordinator = new Coordinator({ redis, keyPrefix });
  const connections = [new Redis(url, { maxRetriesPerRequest: null }), new Redis(url, { maxRetriesPerRequest: null })];
  const secrets = new SecretBox(['test-key-0123456789abcdef']);
  const logs: Array<Record<string, unknown>> = [];
  const log = createLogger({
    level: 'info',
    name: 'deliverer-test',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line.trim() !== '') logs.push(JSON.parse(line));
        done();
      },
    }),
  });

  let requests = 0;
  const receiver = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));

  const prefix = `${keyPrefix}:{webhooks}:q`;
  const queue = new Queue<DeliveryJob>('deliverer-test', { connection: connections[0]!, prefix });
  const outcomes: DeliveryOutcome[] = [];
  const worker = new Worker<DeliveryJob>(
    'deliverer-test',
    (job) => deliver(job, { coordinator, secrets, allowPrivate: true, log, onOutcome: (o) => outcomes.push(o) }),
    { connection: connections[1]!, prefix },
  );
  cleanUp(async () => {
    await worker.close();
    await queue.close();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await deletePrefix(redis, keyPrefix);
    for (const connection of [...connections, redis]) connection.disconnect();
  });

  it('is delivered once: the job completes and the receiver is not called again', async () => {
    const port = (receiver.address() as AddressInfo).port;
    const webhook = await coordinator.webhooks.create({
      url: `http://127.0.0.1:${port}/hook`,
      events: [],
      sealedSecret: secrets.seal(webhookSecret()),
    });
    // Redis refuses the record: its delivery log is a string, so the script's LPUSH fails (WRONGTYPE).
    await redis.set(coordinator.keys.webhookLog(webhook.id), 'not a list');

    const finished = new Promise<{ job: Job<DeliveryJob>; state: 'completed' | 'failed' }>((resolve) => {
      worker.on('completed', (job) => resolve({ job, state: 'completed' }));
      worker.on('failed', (job) => {
        if (job !== undefined && job.attemptsMade >= 3) resolve({ job, state: 'failed' });
      });
    });
    // Retries 10 ms apart: a failed job would be attempted (and POSTed) again at once.
    await queue.add(
      'pending',
      { webhookId: webhook.id, eventId: '1000-0-0', type: 'pending', body: '{"type":"pending"}' },
      { attempts: 3, backoff: { type: 'fixed', delay: 10 } },
    );
    const { job, state } = await finished;

    expect(state).toBe('completed');
    expect(job.returnvalue).toBe('delivered');
    expect(job.attemptsMade).toBe(1);
    expect(requests).toBe(1);
    expect(outcomes).toEqual(['delivered']);
    expect(logs).toContainEqual(
      expect.objectContaining({
        level: 40,
        msg: 'webhook delivered but its attempt was not recorded',
        webhookId: webhook.id,
        eventId: '1000-0-0',
        err: expect.objectContaining({ message: expect.stringContaining('WRONGTYPE') }),
      }),
    );
  });
});
