import type { Coordinator } from '@cq/coordinator';

/** The newest attempt of a webhook's delivery log, as the dashboard shows it (times in epoch ms). */
export interface LastDelivery {
  eventId: string;
  type: string;
  /** 1 for an event's first attempt. */
  attempt: number;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  /** Why the attempt failed without an answer (timed out, refused address, connection error). */
  error?: string;
  at: number;
  /** When the next attempt of that event is due; absent once it was delivered or given up. */
  nextAttemptAt?: number;
}

/** One webhook on the dashboard: never its secret. */
export interface WebhookRow {
  id: string;
  url: string;
  /** Its event types; every type when empty. */
  events: string[];
  createdAt: number;
  /** Absent until its first attempt (or after its log was emptied). */
  last?: LastDelivery;
}

/** What `GET /dashboard/api/webhooks` answers. */
export interface DashboardWebhooks {
  now: number;
  webhooks: WebhookRow[];
}

/**
 * Every webhook, oldest first, with the newest attempt in its delivery log: two round trips (the
 * endpoints, then the head of every log in one pipeline), whatever the number of webhooks.
 */
export async function readDashboardWebhooks(coordinator: Coordinator): Promise<DashboardWebhooks> {
  const webhooks = await coordinator.webhooks.list();
  const latest = await coordinator.webhooks.latestAttempts(webhooks.map((w) => w.id));
  return {
    now: Date.now(),
    webhooks: webhooks.map((w, i) => {
      const a = latest[i];
      return {
        id: w.id,
        url: w.url,
        events: [...w.events],
        createdAt: w.createdAt,
        ...(a === undefined
          ? {}
          : {
              last: {
                eventId: a.eventId,
                type: a.type,
                attempt: a.attempt,
                ...(a.status === undefined ? {} : { status: a.status }),
                ...(a.error === undefined ? {} : { error: a.error }),
                at: a.at,
                ...(a.nextAttemptAt === undefined ? {} : { nextAttemptAt: a.nextAttemptAt }),
              },
            }),
      };
    }),
  };
}
