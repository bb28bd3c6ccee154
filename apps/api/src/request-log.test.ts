import { describe, expect, it } from 'vitest';
import { loggedUrl } from './request-log.js';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';

describe('the request log', () => {
  it("keeps the API's own query parameters and redacts every other value", () => {
    expect(loggedUrl('/v1/spawn')).toBe('/v1/spawn');
    expect(loggedUrl('/v1/spawn?token=abc.def&x')).toBe('/v1/spawn?token=[redacted]&x');
    expect(loggedUrl('/v1/users/u/sessions/s/logs?after=1-2&limit=5&key=k')).toBe(
      '/v1/users/u/sessions/s/logs?after=1-2&limit=5&key=[redacted]',
    );
  });

  it('never holds a token a client put in the query string of a spawn, or a key in any query', async () => {
    const api = await startTestApi();
    const { token } = (
      await send(api.baseUrl, 'POST', '/v1/tokens', {
        headers: jsonHeaders(),
        body: JSON.stringify({ userId: 'careless' }),
      })
    ).body as { token: string };
    await send(api.baseUrl, 'POST', `/v1/spawn?token=${encodeURIComponent(token)}`, {
      headers: jsonHeaders(false),
      body: JSON.stringify({ token }),
    });
    await send(api.baseUrl, 'GET', `/v1/users/careless/session?api_key=${token}`, { headers: jsonHeaders() });
    const requests = api.logs.filter((l) => l['msg'] === 'incoming request');
    expect(requests.map((l) => (l['req'] as { url: string }).url)).toEqual(
      expect.arrayContaining(['/v1/spawn?token=[redacted]', '/v1/users/careless/session?api_key=[redacted]']),
    );
    expect(JSON.stringify(api.logs)).not.toContain(token);
    expect(JSON.stringify(api.logs)).not.toContain(encodeURIComponent(token));
  });
});
