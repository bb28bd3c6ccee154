import type { SessionEventType } from '@cq/client';
import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { table } from '../format.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';

/**
 * `webhooks create <url> [--events a,b]` (the secret is printed once), `webhooks list`,
 * `webhooks delete <id>`, `webhooks deliveries <id>`.
 */
export const webhooks = command(['events'], async (ctx, { positionals, options }) => {
  const [action, argument] = positionals;
  // --events is what a new webhook is sent: the other actions have no use for it.
  const takesNoEvents = (): void => {
    if (options.events !== undefined)
      throw new UsageError(`webhooks ${action ?? 'list'} does not take --events (webhooks create does)`);
  };
  const needArgument = (what: string): string => {
    if (argument === undefined) throw new UsageError(`webhooks ${action} needs ${what}`);
    return argument;
  };
  switch (action) {
    case 'create': {
      const events = options.events
        ?.split(',')
        .map((type) => type.trim())
        .filter((type) => type !== '');
      // The API checks each type (400 naming an unknown one).
      const created = await ctx.client.createWebhook(needArgument('a URL'), events as SessionEventType[] | undefined);
      print(
        ctx,
        created,
        escaped`${created.id}: ${created.url} (${created.events.length === 0 ? 'every event' : created.events.join(', ')})\n` +
          escaped`secret: ${created.secret}\n(shown only now: receivers verify signatures with it)`,
      );
      return exitCodes.ok;
    }
    case 'list':
    case undefined: {
      takesNoEvents();
      const all = await ctx.client.webhooks();
      if (ctx.json) ctx.out(JSON.stringify({ webhooks: all }));
      else if (all.length === 0) ctx.out('no webhooks');
      else
        ctx.out(
          table([
            ['ID', 'URL', 'EVENTS', 'CREATED'],
            ...all.map((w) => [w.id, w.url, w.events.length === 0 ? 'all' : w.events.join(','), w.createdAt]),
          ]),
        );
      return exitCodes.ok;
    }
    case 'delete': {
      takesNoEvents();
      const id = needArgument('a webhook id');
      await ctx.client.deleteWebhook(id);
      print(ctx, { id, deleted: true }, escaped`${id}: deleted; its pending deliveries are dropped`);
      return exitCodes.ok;
    }
    case 'deliveries': {
      takesNoEvents();
      const attempts = await ctx.client.deliveries(needArgument('a webhook id'));
      if (ctx.json) ctx.out(JSON.stringify({ deliveries: attempts }));
      else if (attempts.length === 0) ctx.out('no deliveries yet');
      else
        ctx.out(
          table([
            ['AT', 'EVENT', 'TYPE', 'ATTEMPT', 'OUTCOME', 'NEXT ATTEMPT'],
            ...attempts.map((a) => [
              a.at,
              a.eventId,
              a.type,
              String(a.attempt),
              a.status === undefined ? (a.error ?? '-') : String(a.status),
              a.nextAttemptAt ?? '-',
            ]),
          ]),
        );
      return exitCodes.ok;
    }
    default:
      throw new UsageError(`webhooks has no action "${action}" (create, list, delete, deliveries)`);
  }
});
