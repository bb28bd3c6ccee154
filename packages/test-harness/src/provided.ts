import type {} from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis shared by every test file of the run (see the global setup). */
    redisUrl: string;
  }
}

/** The values the harness's global setup provides to tests through `inject()`. */
export interface HarnessProvided {
  redisUrl: string;
}
