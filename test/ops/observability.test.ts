/**
 * Running it (issue 3 item 6; drill B3's log half): health and readiness,
 * Prometheus metrics, logs that never carry secrets, lease ids or request
 * values, and per-key rate limiting.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiKey, hashSecret, KeyStore, newSecret } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { type Database, pgliteDatabase, postgresDatabase } from '../../src/db/database.js';
import { buildApp, LOG_REDACT } from '../../src/http/app.js';
import { scopeGaugeSource } from '../../src/ledger/sql/stats.js';
import { Sweeper } from '../../src/ledger/sweeper.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { emptyDatabase } from '../process/support.js';
import { onPostgres } from '../support/engine.js';
import { client, expireLease } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

/** A Postgres nobody listens on: connections are refused at once. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/nowhere';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
}, SETUP_MS);
afterAll(() => t.close());

/** The value of one sample of the Prometheus text format, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const scrape = async (app: FastifyInstance) => {
  const r = await app.inject({ method: 'GET', url: '/metrics' });
  expect(r.statusCode).toBe(200);
  expect(r.headers['content-type']).toContain('text/plain');
  return r.body;
};

describe('health and readiness', () => {
  it('/healthz 200 and /readyz 200 on a migrated, reachable database', async () => {
    const h = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(h.statusCode).toBe(200);
    expect(h.json()).toEqual({ status: 'ok' });
    const r = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ status: 'ready' });
  });

  // Starting a fresh embedded engine is slow on a busy machine: headroom, not a timing assertion.
  it('/readyz is a 503 problem when the migrations were never applied; /healthz stays 200', {
    timeout: 180_000,
  }, async () => {
    const db = await pgliteDatabase(undefined);
    const app = await buildApp({ db });
    try {
      const r = await app.inject({ method: 'GET', url: '/readyz' });
      expect(r.statusCode, r.body).toBe(503);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.json()).toMatchObject({ code: 'UNAVAILABLE', retryable: true, status: 503 });
      expect(r.body).not.toMatch(/drizzle|relation|SELECT/i);
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
      await db.close();
    }
  });

  it('the API answers 503 UNAVAILABLE, not 500, on a database never migrated', {
    timeout: 180_000,
  }, async () => {
    const empty = onPostgres() ? await emptyDatabase() : undefined;
    const db = empty ? postgresDatabase(empty.url, loadConfig({}).db) : await pgliteDatabase(undefined);
    const app = await buildApp({ db });
    try {
      const api = client(app, 'fresh');
      for (const r of [await api.begin({ key: 'k', request: {} }), await api.get('k')]) {
        expect(r.status, r.raw).toBe(503);
        expect(r.body).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
        expect(r.raw).not.toMatch(/relation|idem_operations|SELECT/i);
      }
    } finally {
      await app.close();
      await db.close();
      await empty?.drop();
    }
  });

  it('/readyz is a 503 problem when the database is unreachable', async () => {
    const db = postgresDatabase(UNREACHABLE, loadConfig({}).db);
    const app = await buildApp({ db });
    try {
      const r = await app.inject({ method: 'GET', url: '/readyz' });
      expect(r.statusCode, r.body).toBe(503);
      expect(r.json()).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(r.body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|nowhere/);
    } finally {
      await app.close();
      await db.close();
    }
  });
});

describe('metrics', () => {
  it('begin outcomes, HTTP latency and pool gauges', async () => {
    const api = client(t.app, 'obs');
    const before = await scrape(t.app);
    const count = (text: string, outcome: string) => sample(text, 'idem_begin_total', { outcome }) ?? 0;
    const key = `m/${randomUUID()}`;
    const a = await api.begin({ key, request: { a: 1 } });
    await api.begin({ key, request: { a: 1 } }); // someone else's live lease
    await api.begin({ key, request: { a: 2 } }); // another request under the key
    await api.complete(key, a.body.lease.id, 'succeeded', 1);
    await api.begin({ key, request: { a: 1 } }); // replayed
    await api.begin({ key: `m/${randomUUID()}`, request: {}, requireApproval: true });
    const after = await scrape(t.app);
    for (const [outcome, n] of [
      ['acquired', 1],
      ['OPERATION_IN_PROGRESS', 1],
      ['KEY_REUSED', 1],
      ['replayed', 1],
      ['pending_approval', 1],
    ] as const) {
      expect(count(after, outcome) - count(before, outcome), outcome).toBe(n);
    }
    const route = '/v1/scopes/:scope/operations';
    const histCount = (text: string, status: string) =>
      sample(text, 'idem_http_request_duration_seconds_count', { method: 'POST', route, status }) ?? 0;
    expect(histCount(after, '201') - histCount(before, '201')).toBe(1);
    expect(histCount(after, '409') - histCount(before, '409')).toBe(1);
    expect(
      sample(after, 'idem_http_request_duration_seconds_bucket', { route, status: '201', le: '+Inf' }),
    ).toBeGreaterThan(0);
    for (const state of ['total', 'idle', 'in_use', 'waiting']) {
      expect(sample(after, 'idem_db_pool_connections', { state }), state).toBeGreaterThanOrEqual(0);
    }
  });

  it('sweeper runs and rows, and outcome_unknown per scope, as the server wires them', async () => {
    const metrics = createMetrics(t.db, scopeGaugeSource(t.db));
    const app = await buildApp({ db: t.db, metrics });
    const sweeper = new Sweeper(
      t.db,
      { ...loadConfig({}).sweep, intervalMs: 50 },
      pino({ level: 'silent' }),
      metrics,
    );
    try {
      const scope = `obs-${randomUUID().slice(0, 8)}`;
      const api = client(app, scope);
      const key = `m/${randomUUID()}`;
      await api.begin({ key, request: {}, effect: 'non_idempotent_write' });
      await expireLease(t.db, scope, key);
      sweeper.start();
      await vi.waitFor(
        async () => {
          const text = await scrape(app);
          expect(sample(text, 'idem_sweeper_rows_total', { kind: 'lease_expired' })).toBeGreaterThanOrEqual(
            1,
          );
        },
        { timeout: 20_000, interval: 50 },
      );
      await sweeper.stop();
      const text = await scrape(app);
      expect(sample(text, 'idem_sweeper_runs_total', { result: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'idem_sweeper_runs_total', { result: 'error' }) ?? 0).toBe(0);
      expect(sample(text, 'idem_outcome_unknown_operations', { scope })).toBe(1);
      const oldest = sample(text, 'idem_outcome_unknown_oldest_age_seconds', { scope });
      expect(oldest, `no idem_outcome_unknown_oldest_age_seconds{scope="${scope}"} sample`).toBeTypeOf(
        'number',
      );
      expect(oldest).toBeGreaterThanOrEqual(0);
    } finally {
      await sweeper.stop();
      await app.close();
    }
  });
});

describe('metrics while the database is down', () => {
  it('/metrics answers 200 from what the process knows, idem_database_up 0, and counts begin 503s', async () => {
    const db = postgresDatabase(UNREACHABLE, loadConfig({}).db);
    // Wired as the server wires it: the per-scope gauges need the database.
    const metrics = createMetrics(db, scopeGaugeSource(db));
    const app = await buildApp({ db, metrics });
    try {
      const r = await client(app, 'down').begin({ key: `down/${randomUUID()}`, request: {} });
      expect(r.status).toBe(503);
      const text = await scrape(app);
      expect(sample(text, 'idem_database_up')).toBe(0);
      expect(sample(text, 'idem_begin_total', { outcome: 'UNAVAILABLE' })).toBe(1);
      expect(
        sample(text, 'idem_http_request_duration_seconds_count', {
          method: 'POST',
          route: '/v1/scopes/:scope/operations',
          status: '503',
        }),
      ).toBe(1);
      expect(text).not.toMatch(/ECONNREFUSED|nowhere/);
    } finally {
      await app.close();
      await db.close();
    }
  });

  it('idem_database_up is 1 when the database answers', async () => {
    const metrics = createMetrics(t.db, scopeGaugeSource(t.db));
    const app = await buildApp({ db: t.db, metrics });
    try {
      expect(sample(await scrape(app), 'idem_database_up')).toBe(1);
    } finally {
      await app.close();
    }
  });
});

describe('logs', () => {
  /** The log line (message and where) that carries `value`, shortened; undefined if none does. */
  function leaked(text: string, value: string): string | undefined {
    const line = text.split('\n').find((l) => l.includes(value));
    if (!line) return undefined;
    const at = line.indexOf(value);
    const msg = /"msg":"([^"]*)"/.exec(line)?.[1];
    return `line "${msg}": ...${line.slice(Math.max(0, at - 80), at + value.length + 20)}...`;
  }

  /** A pino logger as the server builds it, writing to memory. */
  function capture() {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = pino({ level: 'trace', redact: { paths: LOG_REDACT, censor: '[redacted]' } }, stream);
    return { logger, text: () => lines.join('') };
  }

  const clientSecret = newSecret();
  const operatorSecret = newSecret();
  const keys: ApiKey[] = [
    { name: 'log-client', role: 'client', scopes: ['logs'], sha256: hashSecret(clientSecret) },
    { name: 'log-operator', role: 'operator', scopes: ['logs'], sha256: hashSecret(operatorSecret) },
  ];

  it('never contain an API secret, a lease id, or a request or result value', async () => {
    const log = capture();
    const svc = await createTestApp({ keys, logger: log.logger });
    try {
      const api = client(svc.app, 'logs', clientSecret);
      const op = client(svc.app, 'logs', operatorSecret);
      const tag = randomUUID().slice(0, 8);
      const secrets = [clientSecret, operatorSecret];
      const values = [`card-4111-${tag}`, `cvv-${tag}`, `payout-${tag}`, `note-body-${tag}`];
      const chosenLease = randomUUID();
      const leases = [chosenLease];

      const k1 = `pay/${tag}/1`;
      const a = await api.begin({
        key: k1,
        request: { card: values[0], cvv: values[1] },
        leaseId: chosenLease,
        dispatch: false,
      });
      expect(a.status).toBe(201);
      await api.dispatch(k1, chosenLease);
      await api.heartbeat(k1, chosenLease, 60_000);
      await api.complete(k1, chosenLease, 'succeeded', { payout: values[2] });
      await api.complete(k1, chosenLease, 'failed', { payout: values[2] }); // RESULT_MISMATCH
      await api.begin({ key: k1, request: { card: values[0], cvv: 'other' } }); // KEY_REUSED
      const wrongLease = randomUUID();
      leases.push(wrongLease);
      await api.heartbeat(k1, wrongLease); // LEASE_LOST

      const k2 = `pay/${tag}/2`;
      const b = await api.begin({ key: k2, request: { card: values[0] }, effect: 'non_idempotent_write' });
      leases.push(b.body.lease.id);
      await api.unknown(k2, b.body.lease.id);
      await op.resolve(k2, { status: 'ready', note: 'checked', result: { payout: values[2] } });
      const c = await api.begin({ key: k2, request: { card: values[0] } });
      leases.push(c.body.lease.id);
      await api.release(k2, c.body.lease.id);

      // Failed authentication with a near-miss secret, and a malformed body carrying a value.
      await client(svc.app, 'logs', `${clientSecret}x`).get(k1);
      await api.call('POST', '/v1/scopes/logs/operations', `{"key":"x","request":{"card":"${values[3]}"`);

      const text = log.text();
      expect(text.length).toBeGreaterThan(0);
      expect(text).toContain('"reqId"');
      for (const s of [...secrets, `${clientSecret}x`])
        expect(leaked(text, s), 'an API secret').toBeUndefined();
      for (const l of leases) expect(leaked(text, l), `lease id ${l}`).toBeUndefined();
      for (const v of values) expect(leaked(text, v), `request/result value ${v}`).toBeUndefined();
    } finally {
      await svc.close();
    }
  });

  it('one line per request, written when it is answered: request id, method, URL, status, time', async () => {
    const log = capture();
    const svc = await createTestApp({ keys, logger: log.logger });
    try {
      const auth = { authorization: `Bearer ${clientSecret}` };
      const sent = [
        { method: 'POST' as const, url: '/v1/scopes/logs/operations', status: 201, reqId: randomUUID() },
        { method: 'POST' as const, url: '/v1/scopes/logs/operations', status: 422, reqId: randomUUID() },
        { method: 'GET' as const, url: '/v1/scopes/logs/operations/nope', status: 404, reqId: randomUUID() },
        { method: 'GET' as const, url: '/healthz', status: 200, reqId: randomUUID() },
      ];
      const key = `one-line-${randomUUID()}`;
      for (const [i, r] of sent.entries()) {
        const res = await svc.app.inject({
          method: r.method,
          url: r.url,
          headers: { ...auth, 'x-request-id': r.reqId, 'content-type': 'application/json' },
          payload: r.method === 'POST' ? { key, request: { n: i } } : undefined,
        });
        expect(res.statusCode, r.url).toBe(r.status);
      }
      const lines = log
        .text()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.filter((l) => l.msg === 'incoming request')).toEqual([]);
      for (const r of sent) {
        const mine = lines.filter((l) => l.reqId === r.reqId);
        expect(
          mine.map((l) => l.msg),
          r.url,
        ).toEqual(['request completed']);
        expect(mine[0]).toMatchObject({
          req: { method: r.method, url: r.url },
          res: { statusCode: r.status },
        });
        expect(mine[0]!.responseTime).toBeGreaterThan(0);
      }
    } finally {
      await svc.close();
    }
  });

  it('a database outage is logged without the statement parameters (lease id, request values)', async () => {
    const log = capture();
    const db: Database = postgresDatabase(UNREACHABLE, loadConfig({}).db);
    const app = await buildApp({ db, logger: log.logger });
    try {
      const tag = randomUUID().slice(0, 8);
      const leaseId = randomUUID();
      const r = await client(app, 'logs').begin({
        key: `outage/${tag}`,
        request: { card: `card-${tag}` },
        leaseId,
      });
      expect(r.status).toBe(503);
      expect(r.body.code).toBe('UNAVAILABLE');
      // The response carries no driver detail either.
      expect(r.raw).not.toMatch(/ECONNREFUSED|INSERT|params/);
      const text = log.text();
      expect(text).toContain('database unavailable');
      expect(leaked(text, leaseId), 'the lease id').toBeUndefined();
      expect(leaked(text, `card-${tag}`), 'a request value').toBeUndefined();
    } finally {
      await app.close();
      await db.close();
    }
  });
});

describe('rate limiting', () => {
  const a = newSecret();
  const b = newSecret();
  const keys: ApiKey[] = [
    { name: 'rl-a', role: 'client', scopes: ['rl'], sha256: hashSecret(a) },
    { name: 'rl-b', role: 'client', scopes: ['rl'], sha256: hashSecret(b) },
  ];

  it('per key: the 6th rapid request gets 429 RATE_LIMITED with Retry-After; other keys and public endpoints are not limited', async () => {
    const app = await buildApp({ db: t.db, keys: new KeyStore(keys), rateLimit: { perSecond: 5, burst: 5 } });
    try {
      // A call refused by the handler itself (another scope): no database work. The six
      // go out at once, so the bucket cannot refill in between however slow the machine.
      const call = (secret: string) => client(app, 'elsewhere', secret).get('k');
      const replies = await Promise.all(Array.from({ length: 6 }, () => call(a)));
      expect(replies.map((r) => r.status).sort()).toEqual([403, 403, 403, 403, 403, 429]);
      const sixth = replies.find((r) => r.status === 429)!;
      expect(sixth.headers['content-type']).toContain('application/problem+json');
      expect(sixth.body).toMatchObject({ code: 'RATE_LIMITED', retryable: true, status: 429 });
      expect(Number(sixth.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number.isInteger(Number(sixth.headers['retry-after']))).toBe(true);
      // Another key has its own bucket; public endpoints need no token at all.
      expect((await call(b)).status).toBe(403);
      for (let i = 0; i < 10; i++) {
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      }
    } finally {
      await app.close();
    }
  });

  it('open mode: limited per client address', async () => {
    const app = await buildApp({ db: t.db, rateLimit: { perSecond: 5, burst: 5 } });
    try {
      // A bad cursor is refused by the handler, after the limiter, before any database work.
      const replies = await Promise.all(
        Array.from({ length: 6 }, () => app.inject({ method: 'GET', url: '/v1/operations?cursor=garbage' })),
      );
      expect(replies.map((r) => r.statusCode).sort()).toEqual([400, 400, 400, 400, 400, 429]);
      const other = await app.inject({
        method: 'GET',
        url: '/v1/operations?cursor=garbage',
        remoteAddress: '10.0.0.9',
      });
      expect(other.statusCode).toBe(400);
    } finally {
      await app.close();
    }
  });
});
