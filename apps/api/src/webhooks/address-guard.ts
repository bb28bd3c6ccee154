import { BlockList, isIP } from 'node:net';
import { resolveHost } from './host-resolver.js';

/**
 * SSRF protection for webhook URLs: which addresses a webhook may not reach, and whether a URL may be
 * registered. The same rules run again at delivery (`post-webhook.ts`), on the addresses the connection uses.
 *
 * Prefix matching is Node's `net.BlockList`: CIDR arithmetic from Node's core, for both families, and it
 * already matches an IPv4-mapped IPv6 address (`::ffff:7f00:1`) against IPv4 rules. It cannot say which
 * rule matched (so there is one list per kind, to name the kind in the refusal) and it does not decode the
 * IPv4 address embedded in NAT64, 6to4, Teredo or IPv4-compatible addresses; that is done here, on the
 * eight 16-bit groups of the address.
 */

/** Why an address is refused (the IANA special-purpose registries' categories, roughly). */
export type ForbiddenKind =
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'multicast'
  | 'unspecified'
  | 'carrier-grade-nat'
  | 'ietf-protocol'
  | 'benchmarking'
  | 'documentation'
  | 'reserved'
  | 'broadcast'
  | 'invalid';

/** How an IPv6 address carries an IPv4 address. */
export type Ipv4Embedding = 'IPv4-mapped' | 'IPv4-compatible' | 'NAT64' | '6to4' | 'Teredo';

/** A refused address: its kind, and the IPv4 address that made it so when it is embedded in an IPv6 one. */
export interface ForbiddenAddress {
  kind: ForbiddenKind;
  /** Set when the refusal comes from an IPv4 address inside an IPv6 one. */
  embedded?: { ipv4: string; via: Ipv4Embedding };
}

/** Resolves a host name to every address (A and AAAA) a connection to it may use. */
export type Resolver = (host: string) => Promise<string[]>;

/** Options of {@link checkWebhookUrl}. */
export interface CheckWebhookUrlOptions {
  /** `WEBHOOK_ALLOW_PRIVATE`: allow every address (the scheme and credential rules still hold). */
  allowPrivate: boolean;
  /**
   * Name resolution.
   * @defaultValue {@link resolveHost} (c-ares, bounded: see `host-resolver.ts`), what deliveries use too
   */
  resolve?: Resolver;
}

/** The outcome of {@link checkWebhookUrl}: the parsed URL, or a reason fit for a 400 `webhook_url_forbidden`. */
export type WebhookUrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

const DESCRIPTIONS: Record<ForbiddenKind, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  'carrier-grade-nat': 'a carrier-grade NAT (shared) address',
  'ietf-protocol': 'an IETF protocol assignment address',
  benchmarking: 'a benchmarking address',
  documentation: 'a documentation address',
  reserved: 'a reserved address',
  broadcast: 'the broadcast address',
  invalid: 'not an IP address',
};

const ALLOW_HINT = 'set WEBHOOK_ALLOW_PRIVATE=true to allow it';

type Rule = readonly [network: string, prefix: number];

// Checked in this order; the first list that matches names the kind. Broadcast comes before 240/4.
const IPV4_RULES: ReadonlyArray<readonly [ForbiddenKind, readonly Rule[]]> = [
  ['broadcast', [['255.255.255.255', 32]]],
  ['unspecified', [['0.0.0.0', 8]]],
  ['loopback', [['127.0.0.0', 8]]],
  [
    'private',
    [
      ['10.0.0.0', 8],
      ['172.16.0.0', 12],
      ['192.168.0.0', 16],
    ],
  ],
  ['link-local', [['169.254.0.0', 16]]],
  ['carrier-grade-nat', [['100.64.0.0', 10]]],
  ['ietf-protocol', [['192.0.0.0', 24]]],
  ['benchmarking', [['198.18.0.0', 15]]],
  [
    'documentation',
    [
      ['192.0.2.0', 24],
      ['198.51.100.0', 24],
      ['203.0.113.0', 24],
    ],
  ],
  ['multicast', [['224.0.0.0', 4]]],
  [
    'reserved',
    [
      ['240.0.0.0', 4],
      ['192.88.99.0', 24], // the deprecated 6to4 relay anycast
    ],
  ],
];

// Embedded IPv4 addresses are decoded before these run; what is left of ::/8 (IPv4-compatible addresses
// with a public IPv4 address, and the rest of it) is reserved, as is everything outside 2000::/3.
const IPV6_RULES: ReadonlyArray<readonly [ForbiddenKind, readonly Rule[]]> = [
  ['unspecified', [['::', 128]]],
  ['loopback', [['::1', 128]]],
  [
    'private',
    [
      ['fc00::', 7], // unique local
      ['fec0::', 10], // the deprecated site-local
    ],
  ],
  ['link-local', [['fe80::', 10]]],
  ['multicast', [['ff00::', 8]]],
  ['benchmarking', [['2001:2::', 48]]],
  [
    'documentation',
    [
      ['2001:db8::', 32],
      ['3fff::', 20],
    ],
  ],
  [
    'reserved',
    [
      ['::', 8],
      ['100::', 64], // discard-only
      ['64:ff9b:1::', 48], // local-use NAT64
      ['2001:10::', 28], // ORCHID
      ['2001:20::', 28], // ORCHIDv2
    ],
  ],
];

function blockLists(
  rules: ReadonlyArray<readonly [ForbiddenKind, readonly Rule[]]>,
  type: 'ipv4' | 'ipv6',
): ReadonlyArray<readonly [ForbiddenKind, BlockList]> {
  return rules.map(([kind, subnets]) => {
    const list = new BlockList();
    for (const [network, prefix] of subnets) list.addSubnet(network, prefix, type);
    return [kind, list] as const;
  });
}

const IPV4_LISTS = blockLists(IPV4_RULES, 'ipv4');
const IPV6_LISTS = blockLists(IPV6_RULES, 'ipv6');
const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

function firstMatch(
  lists: ReadonlyArray<readonly [ForbiddenKind, BlockList]>,
  ip: string,
  type: 'ipv4' | 'ipv6',
): ForbiddenKind | undefined {
  return lists.find(([, list]) => list.check(ip, type))?.[0];
}

/** The eight 16-bit groups of a valid IPv6 address (zone removed), the dotted IPv4 tail included. */
function ipv6Groups(ip: string): number[] {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const middle = rest === undefined ? [] : Array.from({ length: 8 - left.length - right.length }, () => '0');
  return [...left, ...middle, ...right].map((group) => Number.parseInt(group, 16));
}

function ipv4FromGroups(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** The IPv4 addresses an IPv6 address embeds (RFC 4291 mapped and compatible, RFC 6052 NAT64, 6to4, Teredo). */
function embeddedIpv4(groups: readonly number[]): Array<{ ipv4: string; via: Ipv4Embedding }> {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = groups;
  const low32 = ipv4FromGroups(g6, g7);
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0) {
    if (g5 === 0xffff) return [{ ipv4: low32, via: 'IPv4-mapped' }];
    // :: and ::1 are themselves; ::/96 otherwise is the deprecated IPv4-compatible form.
    if (g5 === 0 && !(g6 === 0 && g7 <= 1)) return [{ ipv4: low32, via: 'IPv4-compatible' }];
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return [{ ipv4: low32, via: 'NAT64' }];
  }
  if (g0 === 0x2002) return [{ ipv4: ipv4FromGroups(g1, g2), via: '6to4' }];
  if (g0 === 0x2001 && g1 === 0) {
    // Teredo: the server's address in groups 2–3, the client's inverted in groups 6–7.
    return [
      { ipv4: ipv4FromGroups(g2, g3), via: 'Teredo' },
      { ipv4: ipv4FromGroups(~g6 & 0xffff, ~g7 & 0xffff), via: 'Teredo' },
    ];
  }
  return [];
}

/**
 * Why a webhook may not connect to `ip`, or `undefined` when it may. Anything that is not an IP address is
 * refused (`invalid`). IPv6 addresses that embed an IPv4 address are judged by it: `::ffff:127.0.0.1` is
 * loopback, `64:ff9b::a01:203` is private, `2002:a9fe:a9fe::` is link-local.
 */
export function forbiddenAddress(ip: string): ForbiddenAddress | undefined {
  const family = isIP(ip);
  if (family === 4) {
    const kind = firstMatch(IPV4_LISTS, ip, 'ipv4');
    return kind === undefined ? undefined : { kind };
  }
  if (family !== 6) return { kind: 'invalid' };
  const unzoned = ip.split('%')[0] ?? '';

  for (const embedded of embeddedIpv4(ipv6Groups(unzoned))) {
    const kind = firstMatch(IPV4_LISTS, embedded.ipv4, 'ipv4');
    if (kind !== undefined) return { kind, embedded };
    // A mapped or NAT64 address of a public IPv4 address is just that address.
    if (embedded.via === 'IPv4-mapped' || embedded.via === 'NAT64') return undefined;
  }
  const kind =
    firstMatch(IPV6_LISTS, unzoned, 'ipv6') ?? (GLOBAL_UNICAST.check(unzoned, 'ipv6') ? undefined : 'reserved');
  return kind === undefined ? undefined : { kind };
}

/** Whether a webhook may not connect to `ip` (see {@link forbiddenAddress}). */
export function isForbiddenAddress(ip: string): boolean {
  return forbiddenAddress(ip) !== undefined;
}

/** "a loopback address (IPv4-mapped 127.0.0.1)": what a refused address is, for messages. */
export function describeForbiddenAddress(verdict: ForbiddenAddress): string {
  const embedded = verdict.embedded ? ` (${verdict.embedded.via} ${verdict.embedded.ipv4})` : '';
  return `${DESCRIPTIONS[verdict.kind]}${embedded}`;
}

/**
 * Why a connection to `host` at these addresses is refused, or `undefined` when every address is allowed:
 * "localhost resolves to 127.0.0.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it".
 * `host` is the URL's host name (an IP literal is named alone: "10.1.2.3 is a private address; …").
 * No addresses at all is refused too.
 */
export function whyForbidden(host: string, addresses: readonly string[]): string | undefined {
  if (addresses.length === 0) return `${host} resolves to no address`;
  for (const address of addresses) {
    const verdict = forbiddenAddress(address);
    if (verdict === undefined) continue;
    const what = describeForbiddenAddress(verdict);
    return isIP(host) !== 0 && addresses.length === 1 && address === host
      ? `${host} is ${what}; ${ALLOW_HINT}`
      : `${host} resolves to ${address}, ${what}; ${ALLOW_HINT}`;
  }
  return undefined;
}

/** The host of a URL as an address or a name: without IPv6 brackets. */
export function urlHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * The rules a webhook URL must meet that need no name resolution: it parses, it is `http:` or `https:`,
 * it carries no user name or password, and, unless `allowPrivate`, a host that is an IP address is an
 * allowed one. What registration and every delivery attempt check first (a name's addresses are checked
 * after: at registration by {@link checkWebhookUrl}, at delivery on the addresses the connection uses).
 * WHATWG parsing has already turned the decimal, hex and octal IPv4 forms (`http://2130706433`,
 * `http://0x7f.1`, `http://017700000001`) into dotted ones, and IPv6 into its canonical form, so they
 * are judged as the addresses they are.
 */
export function checkUrlForm(raw: string | URL, allowPrivate: boolean): WebhookUrlCheck {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    return { ok: false, reason: 'not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: `the scheme is ${url.protocol}; only http: and https: are allowed` };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'the URL carries a user name or password; remove them' };
  }
  const host = urlHost(url);
  if (!allowPrivate && isIP(host) !== 0) {
    const reason = whyForbidden(host, [host]);
    if (reason !== undefined) return { ok: false, reason };
  }
  return { ok: true, url };
}

/**
 * Whether `raw` may be registered as a webhook URL: {@link checkUrlForm}, and a host name whose every
 * address is allowed (unless `allowPrivate`, which skips the address rules and the resolution).
 *
 * A name that does not resolve, or not within the resolver's bound, is refused (its addresses cannot be
 * checked); a name may still resolve elsewhere later, which is why delivery checks again.
 */
export async function checkWebhookUrl(raw: string, options: CheckWebhookUrlOptions): Promise<WebhookUrlCheck> {
  const form = checkUrlForm(raw, options.allowPrivate);
  if (!form.ok || options.allowPrivate) return form;
  const host = urlHost(form.url);
  if (isIP(host) !== 0) return form;
  let addresses: string[];
  try {
    addresses = await (options.resolve ?? resolveHost)(host);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return { ok: false, reason: `${host} does not resolve (${code})` };
  }
  const reason = whyForbidden(host, addresses);
  return reason === undefined ? form : { ok: false, reason };
}
