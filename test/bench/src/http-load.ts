// The HTTP benchmark's load generator, in a process of its own (so it takes none of the measured
// process's CPU, and the benchmark's own process none of its): one autocannon run of a POST (or of
// `method`), described by the JSON in argv[2] ({@link LoadSpec}); prints one JSON line ({@link LoadResult})
// and exits.
import autocannon from 'autocannon';

/** One run of the load generator. */
export interface LoadSpec {
  url: string;
  /** @defaultValue 'POST' */
  method?: 'GET' | 'POST';
  /** The JSON body; ignored with `randomUser`. */
  body: string;
  headers: Record<string, string>;
  /** Each request a body `{"userId": "bench-<random>"}` of its own (the tokens path: a new user each time). */
  randomUser: boolean;
  connections: number;
  /** Seconds. */
  seconds: number;
}

/** What one run measured. */
export interface LoadResult {
  /** Requests per second (autocannon's average over the run's seconds). */
  rps: number;
  /** Answers in all. */
  requests: number;
  p50: number;
  p99: number;
  /** Answers by status class, and connection errors. */
  statuses: Record<string, number>;
  /** `process.hrtime` (ns, as a string) when the load started and ended: the window of a CPU profile. */
  startedNs: string;
  endedNs: string;
}

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
const startedNs = process.hrtime.bigint();
const result = await autocannon({
  url: spec.url,
  method: spec.method ?? 'POST',
  connections: spec.connections,
  duration: spec.seconds,
  headers: spec.method === 'GET' ? spec.headers : { 'content-type': 'application/json', ...spec.headers },
  ...(spec.method === 'GET' ? {} : { body: spec.body }),
  ...(spec.randomUser
    ? {
        requests: [
          {
            setupRequest: (req: autocannon.Request) => ({
              ...req,
              body: JSON.stringify({ userId: `bench-${Math.floor(Math.random() * 1e9)}` }),
            }),
          },
        ],
      }
    : {}),
});
const endedNs = process.hrtime.bigint();
const answer: LoadResult = {
  rps: result.requests.average,
  requests: result.requests.total,
  p50: result.latency.p50,
  p99: result.latency.p99,
  statuses: { '2xx': result['2xx'], '4xx': result['4xx'], '5xx': result['5xx'], errors: result.errors },
  startedNs: String(startedNs),
  endedNs: String(endedNs),
};
process.stdout.write(`${JSON.stringify(answer)}\n`);
