import { connect, type Socket } from 'node:net';

/** One HTTP answer read off a raw socket. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON bodies of every shape, checked field by field
  body: any;
  /** Milliseconds from the first bytes sent to the whole answer read. */
  elapsedMs: number;
}

/**
 * Writes `bytes` (a request, possibly incomplete: headers without the body they announce, half a header
 * block) to a fresh connection and reads the first answer, without ever sending more: the server must
 * answer from what it has. Resolves once the answer's `Content-Length` bytes are in, or the server closes;
 * rejects after `timeoutMs` without a whole answer.
 */
export function rawExchange(baseUrl: string, bytes: string, timeoutMs = 5000): Promise<RawAnswer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket: Socket = connect(Number(url.port), url.hostname);
    let received = Buffer.alloc(0);
    let settled = false;
    const timer = setTimeout(() => finish(new Error(`no whole answer within ${timeoutMs} ms`)), timeoutMs);
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) {
        reject(err);
        return;
      }
      const text = received.toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const rawBody = text.slice(split + 4);
      let body: unknown = rawBody;
      try {
        body = JSON.parse(rawBody);
      } catch {
        // not JSON: the text
      }
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0),
        headers,
        body,
        elapsedMs: performance.now() - started,
      });
    };
    const complete = (): boolean => {
      const split = received.indexOf('\r\n\r\n');
      if (split < 0) return false;
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(received.subarray(0, split).toString('latin1'));
      return length !== null && received.length - split - 4 >= Number(length[1]);
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (complete()) finish();
    });
    socket.on('close', () => (received.length > 0 ? finish() : finish(new Error('closed without an answer'))));
    socket.on('error', () => {
      // An answer already read still counts (the server may reset a socket it answered and closed).
    });
    socket.write(bytes);
  });
}
