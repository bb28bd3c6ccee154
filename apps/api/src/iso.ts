/** Epoch milliseconds to ISO-8601 UTC, as every time in the API's answers. */
export function iso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** An optional epoch-ms field as ISO-8601, left out when absent. */
export function isoField<K extends string>(name: K, value: number | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [name]: iso(value) } as Record<K, string>);
}
