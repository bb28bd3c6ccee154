// The limit of the webhooks benchmark: a minimal process that follows GET /v1/events of the API and, for
// each event, POSTs its data to every URL of RELAY_TARGETS (comma-separated) at once, as the bare
// minimum a webhook sender must do: the same body, a `webhook-id` header, a fresh connection per POST
// (as the API's deliverer makes: its address is checked on every attempt), no signing, no queue, no
// retries. Writes {"msg":"following"} once its stream is open. Runs until it is stopped.
import { request } from 'node:http';

const apiUrl = process.env['RELAY_API_URL']!;
const apiKey = process.env['RELAY_API_KEY']!;
const targets = process.env['RELAY_TARGETS']!.split(',');

function post(url: string, id: string, body: string): void {
  const req = request(
    url,
    {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'webhook-id': id },
    },
    (res) => res.resume(),
  );
  req.on('error', (err) => process.stdout.write(`${JSON.stringify({ msg: 'post failed', err: err.message })}\n`));
  req.end(body);
}

const req = request(
  `${apiUrl}/v1/events`,
  { headers: { accept: 'text/event-stream', authorization: `Bearer ${apiKey}` } },
  (res) => {
    process.stdout.write(`${JSON.stringify({ msg: 'following', status: res.statusCode })}\n`);
    let buffer = '';
    let id = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) for (const url of targets) post(url, id, line.slice(6));
      }
    });
  },
);
req.on('error', (err) => {
  process.stderr.write(`relay: ${err.message}\n`);
  process.exit(1);
});
req.end();
