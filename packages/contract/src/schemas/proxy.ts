// The session proxy: `POST /v1/sessions/{sessionId}/connect`.
import { z } from 'zod';

export const connectRequest = z
  .object({
    port: z
      .number()
      .int()
      .min(1)
      .max(65_535)
      .optional()
      .describe("The port to open (default: the session's ready port)"),
    ttlMs: z
      .number()
      .int()
      .min(1000)
      .max(86_400_000)
      .optional()
      .describe('How long the token lives, ms (default and most: until the session ends, at most 24 h)'),
  })
  .strict()
  .nullish()
  .meta({ id: 'ConnectRequest' });

export const connectResponse = z
  .object({
    url: z
      .string()
      .describe(
        "Opens the port in a browser, on the session's own origin (its token in the query, exchanged for a cookie)",
      ),
    token: z.string().describe('The connect token, for programs: send it as CQ-Connect-Token'),
    port: z.number().int(),
    expiresAt: z.string().describe('When the token dies (ISO 8601), if the session has not ended before'),
  })
  .meta({ id: 'Connect' });
