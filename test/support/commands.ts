import type { System } from './system.js';

/** Calls per command name that the system's Redis masters have processed so far (INFO commandstats), summed. */
export async function commandCalls(system: System): Promise<Map<string, number>> {
  const redis = system.connect();
  try {
    // A Cluster client knows its masters only once it is ready.
    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
    const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
    if (nodes.length === 0) throw new Error('no Redis master to read commandstats from');
    const infos = await Promise.all(nodes.map((node) => node.info('commandstats')));
    const calls = new Map<string, number>();
    for (const info of infos) {
      for (const [, name, count] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        calls.set(name!, (calls.get(name!) ?? 0) + Number(count));
      }
    }
    return calls;
  } finally {
    redis.disconnect();
  }
}

/** Calls per second of each command between two readings taken `ms` apart. */
export function callRates(before: Map<string, number>, after: Map<string, number>, ms: number): Map<string, number> {
  const rates = new Map<string, number>();
  for (const [name, count] of after) rates.set(name, ((count - (before.get(name) ?? 0)) * 1000) / ms);
  return rates;
}

/** Sum of all rates. */
export function totalRate(rates: Map<string, number>): number {
  let sum = 0;
  for (const rate of rates.values()) sum += rate;
  return sum;
}

/**
 * Calls per second that `more` adds over `base`, command by command: only the increases count, so a
 * command that ran less often (a timer of a host or the API slowed by the CPU the readers take) cannot
 * hide another that ran more. Returns the sum and the commands that grew most, for the failure message.
 */
export function addedRate(
  base: Map<string, number>,
  more: Map<string, number>,
): { readonly added: number; readonly top: string } {
  const grew = [...more]
    .map(([name, rate]) => [name, rate - (base.get(name) ?? 0)] as const)
    .filter(([, delta]) => delta > 0)
    .sort((a, b) => b[1] - a[1]);
  return {
    added: grew.reduce((sum, [, delta]) => sum + delta, 0),
    top: grew
      .slice(0, 5)
      .map(([name, delta]) => `${name} +${delta.toFixed(1)}/s`)
      .join(', '),
  };
}
