import { describe, expect, it } from 'vitest';
import {
  checkWebhookUrl,
  describeForbiddenAddress,
  forbiddenAddress,
  isForbiddenAddress,
  whyForbidden,
  type ForbiddenKind,
  type Resolver,
} from './address-guard.js';
import { resolveHost } from './host-resolver.js';

/** A resolver that answers from a table, as DNS would for these names; unknown names fail as ENOTFOUND. */
function table(entries: Record<string, string[]>): Resolver {
  return async (host) => {
    const found = entries[host];
    if (found === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found;
  };
}

describe('forbiddenAddress', () => {
  const cases: Array<[string, ForbiddenKind]> = [
    // IPv4, each range at its edges
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.0', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.255.255.255', 'unspecified'],
    ['100.64.0.1', 'carrier-grade-nat'],
    ['100.127.255.255', 'carrier-grade-nat'],
    ['192.0.0.9', 'ietf-protocol'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.254', 'reserved'],
    ['192.88.99.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.200', 'documentation'],
    // IPv6
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::', 'unspecified'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fec0::1', 'private'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['ff02::1', 'multicast'],
    ['FF0E::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001:2::1', 'benchmarking'],
    ['100::1', 'reserved'],
    ['64:ff9b:1::1', 'reserved'],
    ['2001:20::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['::8.8.8.8', 'reserved'], // IPv4-compatible, deprecated, whatever it embeds
    ['::1:0:0:0:1', 'reserved'], // the rest of ::/8
    // not an address at all
    ['localhost', 'invalid'],
    ['', 'invalid'],
    ['1.2.3.4%1', 'invalid'],
    ['256.1.1.1', 'invalid'],
  ];
  for (const [ip, kind] of cases) {
    it(`refuses ${JSON.stringify(ip)} as ${kind}`, () => {
      expect(forbiddenAddress(ip)?.kind).toBe(kind);
      expect(isForbiddenAddress(ip)).toBe(true);
    });
  }

  const embedded: Array<[string, ForbiddenKind, string, string]> = [
    ['::ffff:127.0.0.1', 'loopback', '127.0.0.1', 'IPv4-mapped'],
    ['::ffff:7f00:1', 'loopback', '127.0.0.1', 'IPv4-mapped'],
    ['::FFFF:10.1.2.3', 'private', '10.1.2.3', 'IPv4-mapped'],
    ['0:0:0:0:0:ffff:a9fe:a9fe', 'link-local', '169.254.169.254', 'IPv4-mapped'],
    ['::127.0.0.1', 'loopback', '127.0.0.1', 'IPv4-compatible'],
    ['::7f00:1', 'loopback', '127.0.0.1', 'IPv4-compatible'],
    ['64:ff9b::127.0.0.1', 'loopback', '127.0.0.1', 'NAT64'],
    ['64:ff9b::a01:203', 'private', '10.1.2.3', 'NAT64'],
    ['2002:7f00:1::', 'loopback', '127.0.0.1', '6to4'],
    ['2002:a9fe:a9fe::1', 'link-local', '169.254.169.254', '6to4'],
    ['2002:c0a8:101:1::1', 'private', '192.168.1.1', '6to4'],
    // Teredo: client 10.0.0.1 stored inverted (f5ff:fffe)
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', 'private', '10.0.0.1', 'Teredo'],
  ];
  for (const [ip, kind, ipv4, via] of embedded) {
    it(`refuses ${ip} for the ${via} ${ipv4} it embeds`, () => {
      expect(forbiddenAddress(ip)).toEqual({ kind, embedded: { ipv4, via } });
    });
  }

  const allowed = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '9.255.255.255',
    '11.0.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '169.253.255.255',
    '192.167.255.255',
    '192.169.0.0',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4001:82b::200e',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
    '64:ff9b::8.8.8.8',
    '2002:808:808::1',
  ];
  for (const ip of allowed) {
    it(`allows ${ip}`, () => {
      expect(forbiddenAddress(ip)).toBeUndefined();
      expect(isForbiddenAddress(ip)).toBe(false);
    });
  }

  it('allows a Teredo address whose server and client are public', () => {
    // server 65.54.227.120, client 8.8.8.8 (inverted: f7f7:f7f7)
    expect(forbiddenAddress('2001:0:4136:e378:8000:63bf:f7f7:f7f7')).toBeUndefined();
  });
});

describe('describeForbiddenAddress', () => {
  it('names the kind, and the embedded IPv4 address when there is one', () => {
    expect(describeForbiddenAddress({ kind: 'private' })).toBe('a private address');
    expect(describeForbiddenAddress({ kind: 'unspecified' })).toBe('an unspecified address');
    expect(describeForbiddenAddress({ kind: 'loopback', embedded: { ipv4: '127.0.0.1', via: 'IPv4-mapped' } })).toBe(
      'a loopback address (IPv4-mapped 127.0.0.1)',
    );
  });
});

describe('whyForbidden', () => {
  it('names the host, the first refused address and its kind, and the flag', () => {
    expect(whyForbidden('hooks.example', ['93.184.216.34', '10.1.2.3'])).toBe(
      'hooks.example resolves to 10.1.2.3, a private address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    );
  });

  it('names an IP literal alone', () => {
    expect(whyForbidden('10.1.2.3', ['10.1.2.3'])).toBe(
      '10.1.2.3 is a private address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    );
  });

  it('refuses no addresses at all, and allows addresses that are all public', () => {
    expect(whyForbidden('hooks.example', [])).toBe('hooks.example resolves to no address');
    expect(whyForbidden('hooks.example', ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'])).toBeUndefined();
  });
});

describe('checkWebhookUrl', () => {
  const resolve = table({
    localhost: ['127.0.0.1', '::1'],
    'public.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'mixed.example': ['93.184.216.34', '10.0.0.5'],
    'metadata.example': ['169.254.169.254'],
    'empty.example': [],
  });

  const refusedWithoutFlag: Array<[string, RegExp]> = [
    ['http://127.0.0.1', /^127\.0\.0\.1 is a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it$/],
    ['http://localhost', /^localhost resolves to 127\.0\.0\.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true/],
    ['http://localhost:8080/hook', /^localhost resolves to 127\.0\.0\.1, a loopback address/],
    ['http://10.1.2.3', /^10\.1\.2\.3 is a private address/],
    ['http://[::1]', /^::1 is a loopback address/],
    ['http://[::ffff:127.0.0.1]', /^::ffff:7f00:1 is a loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['http://[::ffff:7f00:1]', /^::ffff:7f00:1 is a loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['http://169.254.169.254/latest/meta-data/', /^169\.254\.169\.254 is a link-local address/],
    // WHATWG parsing turns decimal, hex and octal IPv4 forms into dotted ones before we look
    ['http://2130706433', /^127\.0\.0\.1 is a loopback address/],
    ['http://0x7f.1', /^127\.0\.0\.1 is a loopback address/],
    ['http://017700000001', /^127\.0\.0\.1 is a loopback address/],
    ['http://0x7f000001/', /^127\.0\.0\.1 is a loopback address/],
    ['http://127.1', /^127\.0\.0\.1 is a loopback address/],
    ['http://0', /^0\.0\.0\.0 is an unspecified address/],
    ['https://[fd00::1]:8443/x', /^fd00::1 is a private address/],
    ['http://[64:ff9b::7f00:1]', /^64:ff9b::7f00:1 is a loopback address \(NAT64 127\.0\.0\.1\)/],
    ['http://metadata.example', /^metadata\.example resolves to 169\.254\.169\.254, a link-local address/],
    ['http://mixed.example', /^mixed\.example resolves to 10\.0\.0\.5, a private address/],
  ];
  for (const [raw, reason] of refusedWithoutFlag) {
    it(`refuses ${raw} without WEBHOOK_ALLOW_PRIVATE and allows it with`, async () => {
      const refused = await checkWebhookUrl(raw, { allowPrivate: false, resolve });
      expect(refused.ok).toBe(false);
      if (!refused.ok) expect(refused.reason).toMatch(reason);

      const allowed = await checkWebhookUrl(raw, { allowPrivate: true, resolve });
      expect(allowed.ok).toBe(true);
      if (allowed.ok) expect(allowed.url.href).toBe(new URL(raw).href);
    });
  }

  const refusedAlways: Array<[string, RegExp]> = [
    ['ftp://example.com/hook', /^the scheme is ftp:; only http: and https: are allowed$/],
    ['file:///etc/passwd', /^the scheme is file:/],
    ['gopher://127.0.0.1:6379/_INFO', /^the scheme is gopher:/],
    ['javascript:alert(1)', /^the scheme is javascript:/],
    ['http://user:pw@public.example/hook', /user name or password/],
    ['http://user@public.example/hook', /user name or password/],
    ['http://:pw@public.example/hook', /user name or password/],
    ['not a url', /^not a valid URL$/],
    ['http://256.0.0.1', /^not a valid URL$/],
  ];
  for (const [raw, reason] of refusedAlways) {
    it(`refuses ${raw} with or without WEBHOOK_ALLOW_PRIVATE`, async () => {
      for (const allowPrivate of [false, true]) {
        const result = await checkWebhookUrl(raw, { allowPrivate, resolve });
        expect(result.ok, `allowPrivate: ${allowPrivate}`).toBe(false);
        if (!result.ok) expect(result.reason).toMatch(reason);
      }
    });
  }

  it('allows a public IP literal and a name whose every address is public', async () => {
    for (const raw of [
      'https://93.184.216.34/hook',
      'https://[2606:4700:4700::1111]/',
      'https://public.example/h?x=1',
    ]) {
      const result = await checkWebhookUrl(raw, { allowPrivate: false, resolve });
      expect(result, raw).toEqual({ ok: true, url: new URL(raw) });
    }
  });

  it('refuses a name that does not resolve, or resolves to nothing, saying so', async () => {
    expect(await checkWebhookUrl('https://nowhere.example', { allowPrivate: false, resolve })).toEqual({
      ok: false,
      reason: 'nowhere.example does not resolve (ENOTFOUND)',
    });
    expect(await checkWebhookUrl('https://empty.example', { allowPrivate: false, resolve })).toEqual({
      ok: false,
      reason: 'empty.example resolves to no address',
    });
  });

  it('does not resolve names with WEBHOOK_ALLOW_PRIVATE', async () => {
    const calls: string[] = [];
    const counting: Resolver = async (host) => {
      calls.push(host);
      return ['127.0.0.1'];
    };
    expect((await checkWebhookUrl('http://anything.example', { allowPrivate: true, resolve: counting })).ok).toBe(true);
    expect(calls).toEqual([]);
  });

  it('uses the bounded c-ares resolver by default: localhost is loopback, without asking DNS', async () => {
    const result = await checkWebhookUrl('http://localhost:9/', { allowPrivate: false });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/^localhost resolves to 127\.0\.0\.1, a loopback address/);
    expect(await resolveHost('localhost')).toEqual(['127.0.0.1', '::1']);
  });
});
