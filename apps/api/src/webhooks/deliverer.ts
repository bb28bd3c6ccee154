import type { Coordinator, DeliveryAttempt } from '@cq/coordinator';
import { UnrecoverableError, type Job } from 'bullmq';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { Resolver } from './address-guard.js';
import { ATTEMPT_TIMEOUT_MS, DELIVERY_ATTEMPTS, retryDelayMs, type DeliveryJob } from './delivery-job.js';
import { postWebhook } from './post-webhook.js';
import type { SecretBox } from './secret-box.js';
import { sign } from './signature.js';

/** How an attempt ended, for the metrics. */
export type DeliveryOutcome = 'delivered' | 'retrying' | 'gave_up' | 'dropped';

/** What a {@link deliver} call works with. */
export interface DelivererDeps {
  readonly coordinator: Coordinator;
  readonly secrets: SecretBox;
  readonly allowPrivate: boolean;
  /** Name resolution for the connection (its addresses are checked before any is used). @defaultValue `resolveHost` */
  readonly resolve?: Resolver;
  readonly log: Logger;
  readonly onOutcome?: (outcome: DeliveryOutcome) => void;
}

/**
 * One attempt of one delivery (the delivery queue's processor): the webhook as it is now (deleted:
 * dropped, with its pending retries), the body signed per Standard Webhooks with this attempt's
 * timestamp and POSTed within 10 s (its address checked again at connect time: a name that now resolves
 * to a forbidden address is not called), the attempt recorded in the webhook's delivery log. Anything
 * but a 2xx throws, so the queue retries it with its exponential backoff; a 2xx is delivered even when
 * recording it fails (logged), so the receiver does not get it twice.
 */
export async function deliver(job: Job<DeliveryJob>, deps: DelivererDeps): Promise<DeliveryOutcome> {
  const { coordinator, log } = deps;
  const { webhookId, eventId, type, body } = job.data;
  const webhook = await coordinator.webhooks.get(webhookId);
  if (webhook === undefined) {
    deps.onOutcome?.('dropped');
    return 'dropped';
  }
  const attempt = job.attemptsMade + 1;
  const record = async (result: { status?: number; error?: string }, last: boolean): Promise<void> => {
    const entry: DeliveryAttempt = {
      eventId,
      type,
      attempt,
      ...result,
      at: Date.now(),
      ...(last ? {} : { nextAttemptAt: Date.now() + retryDelayMs(attempt) }),
    };
    await coordinator.webhooks.record(webhookId, entry);
  };
  let secret: string;
  try {
    secret = deps.secrets.open(webhook.sealedSecret);
  } catch (err) {
    await record({ error: (err as Error).message }, true);
    deps.onOutcome?.('gave_up');
    throw new UnrecoverableError((err as Error).message);
  }
  // The URL and the addresses are checked by postWebhook, on the very addresses it connects to.
  const timestamp = Math.floor(Date.now() / 1000);
  const result = await postWebhook({
    url: webhook.url,
    body,
    headers: {
      'webhook-id': eventId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': sign({ secret, id: eventId, timestamp, body }),
    },
    timeoutMs: ATTEMPT_TIMEOUT_MS,
    allowPrivate: deps.allowPrivate,
    resolve: deps.resolve,
  });
  const delivered = 'status' in result && result.status >= 200 && result.status < 300;
  const last = delivered || attempt >= DELIVERY_ATTEMPTS;
  if (delivered) {
    // The receiver has it: a failure to record that must not fail the job, or it would be sent again.
    await record(result, true).catch((err: unknown) =>
      log.warn({ err, webhookId, eventId, attempt }, 'webhook delivered but its attempt was not recorded'),
    );
    deps.onOutcome?.('delivered');
    return 'delivered';
  }
  await record(result, last);
  const why = 'status' in result ? `the receiver answered ${result.status}` : result.error;
  deps.onOutcome?.(last ? 'gave_up' : 'retrying');
  if (last) log.warn({ webhookId, eventId, attempt, why }, 'webhook delivery given up after its last attempt');
  throw new Error(`attempt ${attempt} of ${DELIVERY_ATTEMPTS} failed: ${why}`);
}
