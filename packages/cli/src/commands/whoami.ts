import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { command } from './command.js';

/** `whoami`: the key's name and scopes, as the API knows them. */
export const whoami = command([], async (ctx) => {
  const me = await ctx.client.whoami();
  if (ctx.json) ctx.out(JSON.stringify(me));
  else ctx.out(escaped`${me.name}: ${me.scopes.join(', ')}`);
  return exitCodes.ok;
});
