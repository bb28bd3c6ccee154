import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { secretKey, sign, signedHeaders, verify, webhookSecret, WEBHOOK_SECRET_PREFIX } from './signature.js';

// The specification's published test vector (standard-webhooks/standard-webhooks,
// libraries/javascript/src/webhook.test.ts "sign function works"; the same values in every reference library).
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

describe('sign', () => {
  it('reproduces the Standard Webhooks test vector', () => {
    expect(sign(VECTOR)).toBe(VECTOR.signature);
  });

  it('reproduces the test vector from the body as bytes and from the secret without its prefix', () => {
    expect(sign({ ...VECTOR, body: Buffer.from(VECTOR.body) })).toBe(VECTOR.signature);
    expect(sign({ ...VECTOR, secret: VECTOR.secret.slice(WEBHOOK_SECRET_PREFIX.length) })).toBe(VECTOR.signature);
  });

  it('is the HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed by the decoded secret, as a receiver computes it', () => {
    const secret = webhookSecret();
    const body = JSON.stringify({ sessionId: 's-1', state: 'running' });
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`evt-7.1700000000.${body}`).digest('base64');
    expect(sign({ secret, id: 'evt-7', timestamp: 1700000000, body })).toBe(`v1,${expected}`);
  });

  it('signs the bytes sent, including bytes that are not UTF-8', () => {
    const secret = webhookSecret();
    const body = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    const expected = createHmac('sha256', secretKey(secret))
      .update(Buffer.concat([Buffer.from('id.1.'), body]))
      .digest('base64');
    expect(sign({ secret, id: 'id', timestamp: 1, body })).toBe(`v1,${expected}`);
  });

  it('changes with each of id, timestamp, body and secret', () => {
    const base = sign(VECTOR);
    expect(sign({ ...VECTOR, id: 'msg_other' })).not.toBe(base);
    expect(sign({ ...VECTOR, timestamp: VECTOR.timestamp + 1 })).not.toBe(base);
    expect(sign({ ...VECTOR, body: '{"test": 2432232315}' })).not.toBe(base);
    expect(sign({ ...VECTOR, secret: webhookSecret() })).not.toBe(base);
  });

  it('refuses a timestamp that is not whole, non-negative epoch seconds', () => {
    expect(() => sign({ ...VECTOR, timestamp: 1614265330.5 })).toThrow(RangeError);
    expect(() => sign({ ...VECTOR, timestamp: -1 })).toThrow(RangeError);
    expect(() => sign({ ...VECTOR, timestamp: Number.NaN })).toThrow(RangeError);
  });

  it('refuses a secret that is not base64, rather than signing with whatever bytes survive decoding', () => {
    expect(() => sign({ ...VECTOR, secret: 'whsec_not base64!' })).toThrow(TypeError);
    expect(() => sign({ ...VECTOR, secret: 'whsec_' })).toThrow(TypeError);
  });
});

describe('webhookSecret', () => {
  it('is whsec_ and the base64 of 32 random bytes, different every time', () => {
    const secrets = new Set(Array.from({ length: 100 }, () => webhookSecret()));
    expect(secrets.size).toBe(100);
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(secretKey(secret)).toHaveLength(32);
    }
  });
});

describe('signedHeaders', () => {
  it('gives webhook-id, webhook-timestamp and webhook-signature', () => {
    expect(signedHeaders(VECTOR)).toEqual({
      'webhook-id': VECTOR.id,
      'webhook-timestamp': '1614265330',
      'webhook-signature': VECTOR.signature,
    });
  });
});

describe('verify', () => {
  const at = { nowSeconds: VECTOR.timestamp };

  it('accepts the test vector at its own time, with the timestamp as a header string', () => {
    expect(verify({ ...VECTOR, ...at })).toBe(true);
    expect(verify({ ...VECTOR, ...at, timestamp: String(VECTOR.timestamp) })).toBe(true);
  });

  it('accepts a header with several entries when one v1 entry matches, ignoring other versions', () => {
    const signature = `v1a,xyz v2,${VECTOR.signature.slice(3)} v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ${VECTOR.signature}`;
    expect(verify({ ...VECTOR, ...at, signature })).toBe(true);
  });

  it('refuses a tampered body, id or timestamp, and another secret', () => {
    expect(verify({ ...VECTOR, ...at, body: '{"test": 2432232315}' })).toBe(false);
    expect(verify({ ...VECTOR, ...at, id: 'msg_other' })).toBe(false);
    expect(verify({ ...VECTOR, timestamp: VECTOR.timestamp + 1, nowSeconds: VECTOR.timestamp })).toBe(false);
    expect(verify({ ...VECTOR, ...at, secret: webhookSecret() })).toBe(false);
  });

  it('refuses a signature that is only a v2 entry, truncated, empty or not base64', () => {
    expect(verify({ ...VECTOR, ...at, signature: `v2,${VECTOR.signature.slice(3)}` })).toBe(false);
    expect(verify({ ...VECTOR, ...at, signature: VECTOR.signature.slice(0, 20) })).toBe(false);
    expect(verify({ ...VECTOR, ...at, signature: 'v1,' })).toBe(false);
    expect(verify({ ...VECTOR, ...at, signature: '' })).toBe(false);
    expect(verify({ ...VECTOR, ...at, signature: 'v1,!!!!' })).toBe(false);
  });

  it('refuses a timestamp outside the tolerance either way, and accepts one at its edge', () => {
    expect(verify({ ...VECTOR, nowSeconds: VECTOR.timestamp + 300 })).toBe(true);
    expect(verify({ ...VECTOR, nowSeconds: VECTOR.timestamp - 300 })).toBe(true);
    expect(verify({ ...VECTOR, nowSeconds: VECTOR.timestamp + 301 })).toBe(false);
    expect(verify({ ...VECTOR, nowSeconds: VECTOR.timestamp - 301 })).toBe(false);
    expect(verify({ ...VECTOR, nowSeconds: VECTOR.timestamp + 3600, toleranceSeconds: 3600 })).toBe(true);
  });

  it('refuses a timestamp header that is not a whole number of seconds', () => {
    for (const timestamp of ['', 'hello', '1614265330.0', '-1614265330', ' 1614265330']) {
      expect(verify({ ...VECTOR, ...at, timestamp }), timestamp).toBe(false);
    }
  });

  it('checks against the clock by default', () => {
    const timestamp = nowSeconds();
    const input = { secret: VECTOR.secret, id: 'evt-1', timestamp, body: '{}' };
    expect(verify({ ...input, signature: sign(input) })).toBe(true);
    const stale = { ...input, timestamp: timestamp - 3600 };
    expect(verify({ ...stale, signature: sign(stale) })).toBe(false);
  });
});

describe('against the reference implementation (standardwebhooks)', () => {
  it('signs as it does for random secrets, ids and bodies', () => {
    for (let i = 0; i < 50; i += 1) {
      const secret = webhookSecret();
      const id = `evt-${randomBytes(6).toString('hex')}`;
      const timestamp = 1_600_000_000 + i * 7919;
      const body = JSON.stringify({ i, text: randomBytes(i * 3).toString('base64'), unicode: 'é–😀' });
      const theirs = new Webhook(secret).sign(id, new Date(timestamp * 1000), body);
      expect(sign({ secret, id, timestamp, body }), `case ${i}`).toBe(theirs);
    }
  });

  it('verifies what we sign, and we verify what it signs', () => {
    const secret = webhookSecret();
    const body = JSON.stringify({ sessionId: 's-9', state: 'ready' });
    const timestamp = nowSeconds();
    const ours = signedHeaders({ secret, id: 'evt-42', timestamp, body });
    expect(new Webhook(secret).verify(body, ours)).toEqual(JSON.parse(body));

    const theirs = new Webhook(secret).sign('evt-43', new Date(timestamp * 1000), body);
    expect(verify({ secret, id: 'evt-43', timestamp, body, signature: theirs })).toBe(true);
  });

  it('refuses what we sign with another secret', () => {
    const body = '{}';
    const headers = signedHeaders({ secret: webhookSecret(), id: 'evt-1', timestamp: nowSeconds(), body });
    expect(() => new Webhook(webhookSecret()).verify(body, headers)).toThrow(/No matching signature/);
  });
});
