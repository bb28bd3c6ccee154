import { Resolver as DnsResolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Resolver } from './address-guard.js';

/**
 * Name resolution of webhook hosts, bounded in time and off libuv's thread pool. `dns.lookup`
 * (getaddrinfo) runs on that pool of 4 threads, unbounded: a few deliveries to a name whose DNS hangs
 * would stall every file read of the process. c-ares (`dns.promises.Resolver`) asks the DNS servers
 * itself, on the event loop, with a time per try; the whole resolution is bounded on top of that.
 *
 * c-ares does not read /etc/hosts, so `localhost` (and `*.localhost`, RFC 6761) is answered here with
 * the loopback addresses, as getaddrinfo would: refused by the address guard like any loopback address,
 * connected to with WEBHOOK_ALLOW_PRIVATE. Other names in /etc/hosts are not seen.
 */

/** Options of {@link createHostResolver}. */
export interface HostResolverOptions {
  /**
   * DNS servers, as `Resolver.setServers` takes them (`'10.0.0.2'`, `'127.0.0.1:5353'`, `'[::1]:53'`).
   * @defaultValue the system's (`/etc/resolv.conf`)
   */
  readonly servers?: readonly string[];
  /** Time a DNS server has to answer one try of a query, ms (c-ares `timeout`). @defaultValue 1000 */
  readonly tryTimeoutMs?: number;
  /** Tries of a query per server (c-ares `tries`). @defaultValue 2 */
  readonly tries?: number;
  /**
   * Bound on one resolution (its A and AAAA queries, every try and server), ms: then they are cancelled
   * and the name counts as not resolving (`ETIMEOUT`). @defaultValue 3000
   */
  readonly timeoutMs?: number;
}

/** The defaults of {@link HostResolverOptions}. */
export const hostResolverDefaults = { tryTimeoutMs: 1000, tries: 2, timeoutMs: 3000 } as const;

/** What `localhost` resolves to (RFC 6761), without asking DNS. */
const LOOPBACK = ['127.0.0.1', '::1'];

function isLocalhost(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/** An error of Node's DNS shape: `code` as the `dns` module's (`ETIMEOUT`, `ENOTFOUND`, …). */
function dnsError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/**
 * A {@link Resolver} over c-ares: every A and AAAA address of a name, within `timeoutMs`. An IP address
 * is answered as itself; `localhost` with the loopback addresses. A name with only one family (or whose
 * other family's query failed or ran out of time) answers that family's; a name with neither
 * (`ENODATA` twice) answers no address; otherwise the first error (`ENOTFOUND`, `ETIMEOUT`,
 * `ESERVFAIL`, …) is thrown.
 */
export function createHostResolver(options: HostResolverOptions = {}): Resolver {
  const { servers, tryTimeoutMs, tries, timeoutMs } = { ...hostResolverDefaults, ...options };
  return async (host) => {
    if (isIP(host) !== 0) return [host];
    if (isLocalhost(host)) return [...LOOPBACK];
    // One channel per resolution, so that cancelling it at the bound cancels this name's queries only.
    const resolver = new DnsResolver({ timeout: tryTimeoutMs, tries });
    if (servers !== undefined) resolver.setServers(servers);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      resolver.cancel();
    }, timeoutMs);
    let answers: [PromiseSettledResult<string[]>, PromiseSettledResult<string[]>];
    try {
      answers = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    } finally {
      clearTimeout(timer);
    }
    // One family's answer is enough (a name may have no AAAA, or its AAAA query may be the slow one).
    const addresses = answers.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
    if (answers.some((answer) => answer.status === 'fulfilled')) return addresses;
    if (timedOut) throw dnsError('ETIMEOUT', `resolving ${host} took longer than ${timeoutMs} ms`);
    const failure = answers
      .map((answer) => (answer.status === 'rejected' ? (answer.reason as NodeJS.ErrnoException) : undefined))
      .find((err) => err?.code !== 'ENODATA');
    if (failure === undefined) return [];
    throw failure;
  };
}

/** The resolver webhooks use unless told otherwise: {@link createHostResolver} with its defaults. */
export const resolveHost: Resolver = createHostResolver();
