/**
 * 503 UNAVAILABLE (contract section 4) and drill F10 (pool exhaustion): when
 * the database cannot be reached or is overloaded, every endpoint answers fast
 * with a retryable problem that carries no driver message, nothing is half
 * written, and the service recovers on its own.
 *
 * Postgres only: both cases are about the node-postgres pool (a refused TCP
 * connection, a bounded pool whose waiters time out). The embedded engine has
 * no network and no pool: it is one in-process connection.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type Database, postgresDatabase } from '../../src/db/database.js';
import { buildApp } from '../../src/http/app.js';
import { onPostgres } from '../support/engine.js';
import { client, type Reply } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Driver, network and SQL details that must never reach a client. */
const LEAKS = [
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT/,
  /127\.0\.0\.1|localhost|:5432\b/,
  /timeout exceeded|Connection terminated|connect(ion)? (refused|error)/i,
  /\bpg\b|postgres|drizzle|Failed query/i,
  /\b(SELECT|INSERT|UPDATE|DELETE)\b/,
  /idem_operations|idem_events|pg_sleep/,
  /\bat [\w$.<>]+ \(|node_modules|\.ts:\d+/,
];

function expectUnavailable(what: string, r: Reply): void {
  expect(r.status, `${what}: ${r.raw}`).toBe(503);
  expect(r.headers['content-type'], what).toContain('application/problem+json');
  expect(r.body.code, what).toBe('UNAVAILABLE');
  expect(r.body.retryable, what).toBe(true);
  expect(r.body.status, what).toBe(503);
  for (const leak of LEAKS) expect(r.raw, `${what} leaks ${leak}`).not.toMatch(leak);
}

type Api = ReturnType<typeof client>;

/** One call of every endpoint that touches the database. */
function everyEndpoint(api: Api, key: string, leaseId: string, id: string): [string, () => Promise<Reply>][] {
  return [
    ['begin', () => api.begin({ key: `${key}/new`, request: { a: 1 } })],
    ['get by key', () => api.get(key)],
    ['get by id', () => api.getById(id)],
    ['events', () => api.events(key)],
    ['dispatch', () => api.dispatch(key, leaseId)],
    ['heartbeat', () => api.heartbeat(key, leaseId, 60_000)],
    ['complete', () => api.complete(key, leaseId, 'succeeded', { ok: true })],
    ['release', () => api.release(key, leaseId)],
    ['unknown', () => api.unknown(key, leaseId)],
  ];
}

describe.skipIf(!onPostgres())('the database is unreachable', () => {
  let app: FastifyInstance;
  let db: Database;
  beforeAll(async () => {
    // Nothing listens on port 1: every connection attempt is refused.
    db = postgresDatabase('postgres://postgres@127.0.0.1:1/test', loadConfig({}).db);
    app = await buildApp({ db });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await db.close();
  });

  it('every endpoint answers 503 UNAVAILABLE, retryable, with no driver message', async () => {
    const api = client(app);
    for (const [what, call] of everyEndpoint(api, `down/${randomUUID()}`, randomUUID(), randomUUID())) {
      expectUnavailable(what, await call());
    }
  });

  it('readiness says unavailable; liveness does not depend on the database', async () => {
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode, ready.body).toBe(503);
    expectUnavailable('readyz', {
      status: ready.statusCode,
      body: ready.json(),
      headers: ready.headers,
      raw: ready.body,
    });
    const live = await app.inject({ method: 'GET', url: '/healthz' });
    expect(live.statusCode).toBe(200);
  });
});

describe.skipIf(!onPostgres())('F10: pool exhaustion', () => {
  let t: TestApp;
  let small: Database;
  let app: FastifyInstance;
  let api: Api;
  beforeAll(async () => {
    t = await createTestApp();
    small = t.testDb.openAnother({ poolMax: 2, connectTimeoutMs: 1000 });
    app = await buildApp({ db: small });
    await app.ready();
    api = client(app);
  });
  afterAll(async () => {
    await app.close();
    await t.close(); // closes `small` too: it is one of the test database's pools
  });

  it('every pooled connection has statement, lock and idle-in-transaction timeouts', async () => {
    for (const db of [t.db, small]) {
      const rows = await db.rows<Record<string, string>>(sql`SELECT
        current_setting('statement_timeout') AS statement,
        current_setting('lock_timeout') AS lock,
        current_setting('idle_in_transaction_session_timeout') AS idle`);
      for (const [name, value] of Object.entries(rows[0]!)) expect(value, name).not.toBe('0');
    }
  });

  it('with both connections busy, pool max + 10 requests fail fast with 503, none hang; then it recovers', async () => {
    // A live operation to aim the lease-holder calls at.
    const key = `busy/${randomUUID()}`;
    const live = await api.begin({ key, request: { a: 1 }, dispatch: false, leaseMs: 600_000 });
    expect(live.status, live.raw).toBe(201);
    const leaseId = live.body.lease.id as string;
    const id = live.body.operation.id as string;
    const before = await t.db.rows(sql`SELECT * FROM idem_operations ORDER BY key`);
    const eventsBefore = await t.db.rows(sql`SELECT * FROM idem_events ORDER BY key, version`);

    // Hold both connections of the service's own pool.
    let sleepsDone = false;
    const sleeps = Promise.all([
      small.rows(sql`SELECT pg_sleep(3)`),
      small.rows(sql`SELECT pg_sleep(3)`),
    ]).finally(() => {
      sleepsDone = true;
    });
    for (let i = 0; i < 100; i++) {
      const s = small.poolStats();
      if (s.total === 2 && s.idle === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(small.poolStats()).toMatchObject({ total: 2, idle: 0 });

    // pool max + 10 = 12 requests, every kind, all at once.
    const calls = everyEndpoint(api, key, leaseId, id);
    const twelve = Array.from({ length: 12 }, (_, i) => calls[i % calls.length]!);
    const answers = await Promise.all(
      twelve.map(async ([what, call]) => {
        const r = await call();
        return { what, r, beforeSleepsEnded: !sleepsDone };
      }),
    );
    for (const a of answers) {
      expectUnavailable(a.what, a.r);
      // It came back while the connections were still busy: it did not wait for them.
      expect(a.beforeSleepsEnded, `${a.what} waited for the busy connections`).toBe(true);
    }
    // Liveness is not the database.
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);

    await sleeps;
    // Nothing was half-written by the refused calls.
    expect(await t.db.rows(sql`SELECT * FROM idem_operations ORDER BY key`)).toEqual(before);
    expect(await t.db.rows(sql`SELECT * FROM idem_events ORDER BY key, version`)).toEqual(eventsBefore);

    // The same service recovers without a restart.
    const g = await api.get(key);
    expect(g.status, g.raw).toBe(200);
    expect(g.body.operation.status).toBe('in_progress');
    expect((await api.begin({ key: `${key}/new`, request: { a: 1 } })).status).toBe(201);
    expect((await api.dispatch(key, leaseId)).status).toBe(200);
    expect((await api.complete(key, leaseId, 'succeeded', { ok: true })).status).toBe(200);
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode, ready.body).toBe(200);
  });
});
