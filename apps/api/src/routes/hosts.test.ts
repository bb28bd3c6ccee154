import { describe, expect, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from '../test-support/app.js';
import { inlineRefs } from '../test-support/openapi.js';

describe('capacity, hosts and drain', async () => {
  const api = await startTestApi({ CAPACITY_CHECK: 'true', TOKEN_LIMIT: '100000', SPAWN_INTERVAL_MS: '60000' });
  // A worker host as the API sees one: its heartbeat in Redis (the hosts themselves are tested end to end).
  const host = (workerId: string, slots: number, busy = 0) =>
    api.coordinator.workers.heartbeat({ workerId, slots, busy, startedAt: Date.parse('2026-11-22T10:00:00Z') }, 60_000);
  const spawn = (token: string) =>
    send(api.baseUrl, 'POST', '/v1/spawn', { body: JSON.stringify({ token }), headers: jsonHeaders(false) });
  const token = async (userId: string) => (await api.client.issueToken({ userId })).token;
  const get = (path: string) => send(api.baseUrl, 'GET', path, { headers: jsonHeaders() });
  const post = (path: string) =>
    send(api.baseUrl, 'POST', path, { headers: { authorization: jsonHeaders().authorization! } });

  it('503 no_capacity with Retry-After once the slots are held; the refused token and throttle stay as they were', async () => {
    await host('cap-a', 2);
    expect((await get('/v1/hosts')).body).toEqual({
      hosts: [
        {
          workerId: 'cap-a',
          pool: 'default',
          state: 'active',
          slots: 2,
          busy: 0,
          heartbeatAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          startedAt: '2026-11-22T10:00:00.000Z',
          containment: 'group',
          isolation: { network: 'host', filesystem: 'shared', cpus: null },
        },
      ],
      freeSlots: 2,
    });
    expect((await spawn(await token('cap-1'))).status).toBe(202);
    expect((await spawn(await token('cap-2'))).status).toBe(202);
    const refusedToken = await token('cap-3');
    const refused = await spawn(refusedToken);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body.error).toMatchObject({ code: 'no_capacity', retryAfterMs: 1000, pool: 'default' });
    expect(refused.body.error.message).toMatch(/pool default/);
    expect(await api.coordinator.sessions.settleAndRead('cap-3')).toBeUndefined();
    expect((await get('/v1/hosts')).body.freeSlots).toBe(0);

    // A pending session stopped gives its slot back at once; the refused token then works (its throttle
    // was not moved: SPAWN_INTERVAL_MS is a minute).
    expect((await send(api.baseUrl, 'DELETE', '/v1/users/cap-1/session', { headers: jsonHeaders() })).status).toBe(202);
    expect((await get('/v1/hosts')).body.freeSlots).toBe(1);
    expect((await spawn(refusedToken)).status).toBe(202);

    const metrics = (await send(api.baseUrl, 'GET', '/metrics')).body as string;
    expect(metrics).toContain('cq_admissions_total{outcome="no_capacity",pool="default"} 1');
    expect(metrics).toContain('cq_worker_slots{pool="default",kind="free"} 0');
    expect(metrics).toContain('cq_worker_hosts{state="active"} 1');
  });

  it('drain: 202 with the host now draining, its free slots leave the capacity at once; 404 no_host; 400 for a bad id', async () => {
    await host('cap-b', 3, 1);
    const before = (await get('/v1/hosts')).body.freeSlots as number;
    const drained = await post('/v1/hosts/cap-b/drain');
    expect(drained.status).toBe(202);
    expect(drained.body).toMatchObject({
      workerId: 'cap-b',
      state: 'draining',
      slots: 3,
      busy: 1,
      containment: 'group',
    });
    const after = (await get('/v1/hosts')).body;
    expect(after.hosts.find((h: { workerId: string }) => h.workerId === 'cap-b')).toMatchObject({ state: 'draining' });
    expect(after.freeSlots).toBe(before - 2);
    expect((await post('/v1/hosts/cap-b/drain')).status).toBe(202);
    const unknown = await post('/v1/hosts/nobody/drain');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('no_host');
    expect((await post('/v1/hosts/' + encodeURIComponent('bad host{}') + '/drain')).status).toBe(400);
    expect((await send(api.baseUrl, 'POST', '/v1/hosts/cap-b/drain')).status).toBe(401);
    expect((await send(api.baseUrl, 'GET', '/v1/hosts')).status).toBe(401);
  });

  it('each host says its containment, as its heartbeat gave it (group when it gave none); the typed client reads it', async () => {
    const startedAt = Date.parse('2026-11-22T10:00:00Z');
    await api.coordinator.workers.heartbeat(
      { workerId: 'box-ns', slots: 1, busy: 0, startedAt, containment: 'namespace' },
      60_000,
    );
    await api.coordinator.workers.heartbeat({ workerId: 'box-pg', slots: 1, busy: 0, startedAt }, 60_000);
    const { hosts } = await api.client.hosts();
    const containment = (id: string) => hosts.find((h) => h.workerId === id)?.containment;
    expect([containment('box-ns'), containment('box-pg')]).toEqual(['namespace', 'group']);
    expect(await api.client.drainHost('box-ns')).toMatchObject({ state: 'draining', containment: 'namespace' });
    const doc = inlineRefs((await send(api.baseUrl, 'GET', '/openapi.json')).body);
    const host = doc.paths['/v1/hosts'].get.responses['200'].content['application/json'].schema.properties.hosts.items;
    expect(host.required).toContain('containment');
    expect(host.properties.containment.enum).toEqual(['namespace', 'group']);
  });

  it('each host says its isolation, as its heartbeat gave it (not isolated when it gave none); the typed client reads it', async () => {
    const startedAt = Date.parse('2026-11-22T10:00:00Z');
    await api.coordinator.workers.heartbeat(
      {
        workerId: 'iso-none',
        slots: 1,
        busy: 0,
        startedAt,
        isolation: { network: 'none', filesystem: 'private', cpus: 0.5 },
      },
      60_000,
    );
    await api.coordinator.workers.heartbeat(
      {
        workerId: 'iso-egress',
        slots: 1,
        busy: 0,
        startedAt,
        isolation: { network: 'egress', filesystem: 'private', cpus: null },
      },
      60_000,
    );
    await api.coordinator.workers.heartbeat({ workerId: 'iso-old', slots: 1, busy: 0, startedAt }, 60_000);
    // As JSON on the wire, and through the typed client.
    const listed = (await get('/v1/hosts')).body as { hosts: Array<{ workerId: string; isolation: unknown }> };
    const isolation = (id: string) => listed.hosts.find((h) => h.workerId === id)?.isolation;
    expect([isolation('iso-none'), isolation('iso-egress'), isolation('iso-old')]).toEqual([
      { network: 'none', filesystem: 'private', cpus: 0.5 },
      { network: 'egress', filesystem: 'private', cpus: null },
      { network: 'host', filesystem: 'shared', cpus: null },
    ]);
    const { hosts } = await api.client.hosts();
    expect(hosts.find((h) => h.workerId === 'iso-none')?.isolation).toEqual({
      network: 'none',
      filesystem: 'private',
      cpus: 0.5,
    });
    expect(await api.client.drainHost('iso-none')).toMatchObject({
      state: 'draining',
      isolation: { network: 'none', filesystem: 'private', cpus: 0.5 },
    });
    const doc = inlineRefs((await send(api.baseUrl, 'GET', '/openapi.json')).body);
    const host = doc.paths['/v1/hosts'].get.responses['200'].content['application/json'].schema.properties.hosts.items;
    expect(host.required).toContain('isolation');
    const schema = host.properties.isolation;
    expect(schema.required).toEqual(['network', 'filesystem', 'cpus']);
    expect(schema.properties.network.enum).toEqual(['none', 'egress', 'host']);
    expect(schema.properties.filesystem.enum).toEqual(['private', 'shared']);
    expect(schema.description).toMatch(/apart/);
    expect(schema.properties.cpus.description).toMatch(/SESSION_CPUS/);
    for (const id of ['iso-none', 'iso-egress', 'iso-old']) await api.coordinator.workers.withdraw(id);
  });
});

describe('pools: capacity per pool, GET /v1/pools and GET /v1/hosts?pool=', async () => {
  const api = await startTestApi({
    CAPACITY_CHECK: 'true',
    TOKEN_LIMIT: '1000',
    SPAWN_INTERVAL_MS: '1',
    SPAWN_BURST: '100',
  });
  const get = (path: string) => send(api.baseUrl, 'GET', path, { headers: jsonHeaders() });
  const spawnIn = async (userId: string, pool: string) => {
    const issued = await send(api.baseUrl, 'POST', '/v1/tokens', {
      headers: jsonHeaders(),
      body: JSON.stringify({ userId, pool }),
    });
    return send(api.baseUrl, 'POST', '/v1/spawn', {
      headers: jsonHeaders(false),
      body: JSON.stringify({ token: issued.body.token }),
    });
  };

  it("a full pool refuses with no_capacity naming it while another pool admits; a pool's hosts and slots show apart", async () => {
    const beat = (workerId: string, slots: number, pool: string) =>
      api.coordinator.workers.heartbeat({ workerId, slots, busy: 0, startedAt: Date.now(), pool }, 60_000);
    await beat('gpu-1', 1, 'gpu');
    await beat('cpu-1', 3, 'cpu');
    expect((await spawnIn('p-1', 'gpu')).status).toBe(202);
    const full = await spawnIn('p-2', 'gpu');
    expect(full.status).toBe(503);
    expect(full.body.error).toMatchObject({ code: 'no_capacity', pool: 'gpu' });
    expect(full.body.error.message).toMatch(/pool gpu/);
    for (const user of ['p-3', 'p-4', 'p-5']) expect((await spawnIn(user, 'cpu')).status).toBe(202);
    expect((await spawnIn('p-6', 'cpu')).body.error).toMatchObject({ code: 'no_capacity', pool: 'cpu' });
    // A pool without any host refuses too.
    expect((await spawnIn('p-7', 'nowhere')).body.error).toMatchObject({ code: 'no_capacity', pool: 'nowhere' });

    expect((await get('/v1/pools')).body).toEqual({
      pools: [
        { pool: 'cpu', hosts: 1, slots: 3, busy: 0, free: 0, pending: 3 },
        { pool: 'gpu', hosts: 1, slots: 1, busy: 0, free: 0, pending: 1 },
      ],
    });
    const gpuHosts = (await get('/v1/hosts?pool=gpu')).body;
    expect(gpuHosts.hosts.map((h: { workerId: string; pool: string }) => [h.workerId, h.pool])).toEqual([
      ['gpu-1', 'gpu'],
    ]);
    expect(gpuHosts.freeSlots).toBe(0);
    expect((await get('/v1/hosts?pool=Bad')).status).toBe(400);
    // A stopped pending session gives its pool's slot back.
    await send(api.baseUrl, 'DELETE', '/v1/users/p-1/session', { headers: jsonHeaders() });
    expect((await get('/v1/hosts?pool=gpu')).body.freeSlots).toBe(1);
    const metrics = (await send(api.baseUrl, 'GET', '/metrics')).body as string;
    expect(metrics).toContain('cq_worker_slots{pool="cpu",kind="total"} 3');
    expect(metrics).toContain('cq_admissions_total{outcome="no_capacity",pool="gpu"} 1');
  });
});
