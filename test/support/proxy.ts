// Reaching a session through the API's session proxy from a test: requests to a session's origin
// (`<port>-<sessionId>.localhost:<PORT>`) are sent to the API's address with that Host header, as a
// browser resolving *.localhost to loopback would.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import WebSocket from 'ws';
import { API_KEY } from './system.js';

export interface ProxyAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json<T = Record<string, unknown>>(): T;
}

/** The host:port of the API in `baseUrl`. */
export function apiAddress(baseUrl: string): { host: string; port: number } {
  const url = new URL(baseUrl);
  return { host: url.hostname, port: Number(url.port) };
}

/** The Host header of a session's origin on the API at `baseUrl`. */
export function originHost(baseUrl: string, sessionId: string, port: number): string {
  return `${port}-${sessionId}.localhost:${apiAddress(baseUrl).port}`;
}

/** One request to the API at `baseUrl` with the Host header `host`. */
export function hostRequest(
  baseUrl: string,
  host: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<ProxyAnswer> {
  const { port } = apiAddress(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path,
        headers: { host, ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: <T>() => JSON.parse(body.toString()) as T,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** `POST /v1/sessions/{id}/connect`: the connect URL's parts. */
export async function connectTo(
  baseUrl: string,
  sessionId: string,
  body: { port?: number; ttlMs?: number } = {},
  apiKey: string = API_KEY,
): Promise<{
  status: number;
  url: string;
  token: string;
  port: number;
  expiresAt: string;
  body: Record<string, unknown>;
}> {
  const res = await fetch(`${baseUrl}/v1/sessions/${sessionId}/connect`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  return {
    status: res.status,
    url: String(json['url'] ?? ''),
    token: String(json['token'] ?? ''),
    port: Number(json['port']),
    expiresAt: String(json['expiresAt'] ?? ''),
    body: json,
  };
}

/** A WebSocket to `url` (with `headers`), once it is open; rejects with its error (a refused upgrade). */
export async function openWebSocket(url: string, headers?: Record<string, string>): Promise<WebSocket> {
  const ws = new WebSocket(url, headers === undefined ? {} : { headers });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}
