/** Epoch milliseconds to ISO-8601 UTC, as every time in the API's answers. */
export function iso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}
