import { print } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { duration, isolationWords, table } from '../format.js';
import { command } from './command.js';

/** `hosts [--pool P]`: the live worker hosts (of one pool) and the free slots. */
export const hosts = command(['pool'], async (ctx, { options }) => {
  const { hosts, freeSlots } = await ctx.client.hosts(options.pool === undefined ? {} : { pool: options.pool });
  if (ctx.json) ctx.out(JSON.stringify({ hosts, freeSlots }));
  else {
    const now = Date.now();
    if (hosts.length === 0) ctx.out('no live worker hosts');
    else
      ctx.out(
        table([
          ['HOST', 'POOL', 'STATE', 'BUSY', 'SLOTS', 'CONTAINMENT', 'ISOLATION', 'HEARTBEAT', 'UP SINCE'],
          ...hosts.map((h) => [
            h.workerId,
            h.pool,
            h.state,
            String(h.busy),
            String(h.slots),
            h.containment,
            isolationWords(h.isolation),
            `${duration(now - Date.parse(h.heartbeatAt))} ago`,
            h.startedAt,
          ]),
        ]),
      );
    ctx.out(escaped`free slots: ${freeSlots}`);
  }
  return exitCodes.ok;
});

/** `pools`: every pool with a live host or a session waiting. */
export const pools = command([], async (ctx) => {
  const pools = await ctx.client.pools();
  if (ctx.json) ctx.out(JSON.stringify({ pools }));
  else if (pools.length === 0) ctx.out('no pools: no live worker host, no session waiting');
  else
    ctx.out(
      table([
        ['POOL', 'HOSTS', 'SLOTS', 'BUSY', 'FREE', 'PENDING'],
        ...pools.map((p) => [
          p.pool,
          String(p.hosts),
          String(p.slots),
          String(p.busy),
          String(p.free),
          String(p.pending),
        ]),
      ]),
    );
  return exitCodes.ok;
});

/** `drain <workerId>`: no new sessions on the host; it exits 0 after its last one. */
export const drain = command([], async (ctx, { need }) => {
  const host = await ctx.client.drainHost(need('a worker host id'));
  print(
    ctx,
    host,
    escaped`${host.workerId}: draining, ${host.busy} session(s) left to end on their own; it exits when they have`,
  );
  return exitCodes.ok;
});
