/** `POST /v1/spawn` with `token`, returning status and parsed body. */
export async function jsonSpawn(
  baseUrl: string,
  token: string,
): Promise<{ status: number; body: unknown; ms: number }> {
  const start = performance.now();
  const res = await fetch(`${baseUrl}/v1/spawn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  return { status: res.status, body: await res.json(), ms: performance.now() - start };
}
