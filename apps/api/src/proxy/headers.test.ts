import { describe, expect, it } from 'vitest';
import { cookieValue, sessionHeaders, withoutCookie, withoutTokenParam } from './headers.js';

const forwarding = {
  clientIp: '192.0.2.1',
  proto: 'http' as const,
  host: '8080-x.localhost:3000',
  userId: 'u',
  sessionId: 's',
  consumedAuthorization: false,
};

describe('what a session receives of a proxied request', () => {
  it('the connect token leaves the query, however its name is encoded', () => {
    expect(withoutTokenParam('a=1&cq_connect=T&b=2')).toBe('a=1&b=2');
    expect(withoutTokenParam('cq%5Fconnect=T&a=1')).toBe('a=1');
    expect(withoutTokenParam('cq%5fconnect=T')).toBe('');
    expect(withoutTokenParam('cq_connectx=1&x=cq_connect')).toBe('cq_connectx=1&x=cq_connect');
  });

  it('the proxy’s cookie leaves the Cookie header; the session’s own stay', () => {
    expect(cookieValue('a=1; cq_proxy=T; b=2', 'cq_proxy')).toBe('T');
    expect(withoutCookie('a=1; cq_proxy=T; b=2', 'cq_proxy')).toBe('a=1; b=2');
    expect(withoutCookie('cq_proxy=T', 'cq_proxy')).toBeUndefined();
  });

  it('hop-by-hop headers, Expect and the client’s copies of the proxy’s headers (CGI spellings too) never pass; the proxy sets its own', () => {
    const out = sessionHeaders(
      {
        connection: 'keep-alive, x-other',
        'keep-alive': 'timeout=5',
        expect: '100-continue',
        upgrade: 'h2c',
        te: 'trailers',
        'cq-user-id': 'someone',
        cq_user_id: 'someone',
        'x-forwarded-for': '203.0.113.1',
        x_forwarded_for: '203.0.113.1',
        'cq-connect-token': 'T',
        cookie: 'cq_proxy=T; mine=1',
        authorization: 'Basic abc',
        'x-kept': 'yes',
      },
      forwarding,
    );
    expect(out).toEqual({
      'x-kept': 'yes',
      authorization: 'Basic abc',
      cookie: 'mine=1',
      host: '8080-x.localhost:3000',
      'x-forwarded-for': '192.0.2.1',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': '8080-x.localhost:3000',
      'cq-user-id': 'u',
      'cq-session-id': 's',
    });
    expect(
      sessionHeaders({ authorization: 'Bearer key' }, { ...forwarding, consumedAuthorization: true }),
    ).not.toHaveProperty('authorization');
  });
});
