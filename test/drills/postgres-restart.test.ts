/**
 * Drill F5: Postgres restarts under load. The service (a child process) runs
 * on a PRIVATE Postgres cluster that the test creates with initdb on a free
 * port (see support/private-postgres.ts): the shared test Postgres is never
 * restarted, since other test files run on it in parallel.
 *
 * Under load from workers that retry 503s with the same key and `leaseId`:
 * 1. `pg_ctl restart -m immediate` (every backend killed, crash recovery);
 * 2. `pg_ctl stop -m immediate`, 3 s down, `pg_ctl start`.
 *
 * Proved: while the database is down every request fails fast (well within
 * the 2 s pool wait) with 503 `UNAVAILABLE`, `retryable: true`, `Retry-After`;
 * never a 500, never a hang, never a dropped connection; the same service
 * process (same pid) serves again once the database is back (the pool
 * recovers by itself); no acknowledged write is lost; effects == keys.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres } from '../support/engine.js';
import { Downstream } from './support/downstream.js';
import { canRunPrivateCluster, PrivateCluster } from './support/private-postgres.js';
import { ledger, type RawReply, send, TransportError } from './support/raw-http.js';
import { Replica, sleep } from './support/replica.js';

const WORKERS = 8;
const LOAD_MS = 3000;
const DOWN_MS = 3000;
/** A 503 must come back well within the pool's 2 s wait for a connection (IDEM_DB_CONNECT_TIMEOUT_MS). */
const FAST_MS = 3000;

interface Answer {
  what: string;
  start: number;
  end: number;
  status: number;
  code?: string;
  retryable?: boolean;
  retryAfter?: string;
  contentType?: string;
}

interface Op {
  key: string;
  leaseId: string;
  request: Record<string, unknown>;
  acquired?: number;
  sentResult?: unknown;
  ackedResult?: unknown;
}

// Postgres-only like every drill; also needs the Postgres server binaries (initdb, pg_ctl)
// to run a private cluster that this drill may crash.
describe.skipIf(!onPostgres() || !canRunPrivateCluster())('F5 Postgres restart under load', () => {
  let cluster: PrivateCluster;
  let replica: Replica;
  const downstream = new Downstream();

  beforeAll(async () => {
    cluster = await PrivateCluster.create();
    const admin = new pg.Client({ connectionString: cluster.url(), connectionTimeoutMillis: 10_000 });
    await admin.connect();
    await admin.query('CREATE DATABASE idem');
    await admin.end();
    replica = new Replica({ name: 'f5-replica', databaseUrl: cluster.url('idem'), migrateOnStart: true });
    await Promise.all([replica.start(), downstream.start()]);
  }, 120_000);

  afterAll(async () => {
    await replica?.stop();
    await downstream.close();
    await cluster?.destroy();
  }, 60_000);

  it('503 UNAVAILABLE fast while down, the pool recovers in the same process, no acknowledged write lost', async () => {
    const api = ledger(() => replica.url);
    const pid = replica.pid;
    const answers: Answer[] = [];
    const transport: string[] = [];
    const unexpected: string[] = [];
    const now = () => performance.now();

    async function call(what: string, fn: () => Promise<RawReply>): Promise<RawReply> {
      for (;;) {
        const start = now();
        try {
          const r = await fn();
          answers.push({
            what,
            start,
            end: now(),
            status: r.status,
            code: r.body?.code,
            retryable: r.body?.retryable,
            retryAfter: r.headers['retry-after'] as string | undefined,
            contentType: r.headers['content-type'],
          });
          if (r.status !== 503) return r;
        } catch (err) {
          if (!(err instanceof TransportError)) throw err;
          transport.push(`${what}: ${err.code} ${err.message}`);
        }
        await sleep(100 + Math.random() * 100);
      }
    }

    const ops: Op[] = [];
    let reentered = 0;
    let stopping = false;
    const workers = Array.from({ length: WORKERS }, async (_, w) => {
      while (!stopping) {
        const op: Op = {
          key: `f5/w${w}/${ops.length}/${randomUUID()}`,
          leaseId: randomUUID(),
          request: { n: ops.length },
        };
        ops.push(op);
        const b = await call('begin', () =>
          api.begin({
            key: op.key,
            request: op.request,
            effect: 'non_idempotent_write',
            leaseMs: 120_000,
            leaseId: op.leaseId,
          }),
        );
        if (!(b.body.outcome === 'acquired' && b.body.lease.id === op.leaseId)) {
          unexpected.push(`${op.key} begin: ${b.status} ${b.raw.slice(0, 200)}`);
          continue;
        }
        op.acquired = b.body.lease.attempt;
        if (b.status === 200) reentered++; // an earlier try committed but its answer was a 503
        await downstream.perform({
          key: op.key,
          attempt: op.acquired!,
          leaseId: op.leaseId,
          worker: `w${w}`,
          value: op.key,
        });
        op.sentResult = { ticket: `T-${op.key}` };
        const c = await call('complete', () => api.complete(op.key, op.leaseId, 'succeeded', op.sentResult));
        if (c.status !== 200) unexpected.push(`${op.key} complete: ${c.status} ${c.raw.slice(0, 200)}`);
        else op.ackedResult = c.body.operation.result;
      }
    });
    // Readiness and reads are probed all along too.
    const probes = (async () => {
      while (!stopping) {
        await call('readyz', () => send(replica.url, 'GET', '/readyz')).catch(() => {});
        await sleep(100);
      }
    })();

    const m: Record<string, number> = {};
    await sleep(LOAD_MS);
    m.restartFrom = now();
    await cluster.restartImmediate();
    m.restartTo = now();
    await sleep(LOAD_MS);
    m.stopFrom = now();
    await cluster.stopImmediate();
    m.down = now();
    await sleep(DOWN_MS);
    m.startFrom = now();
    await cluster.start();
    m.up = now();
    await sleep(2 * LOAD_MS);
    stopping = true;
    await Promise.all([...workers, probes]);

    const unavailable = answers.filter((a) => a.status === 503);
    const whileDown = answers.filter((a) => a.start >= m.down! && a.end <= m.startFrom!);
    const firstOkAfterUp = answers.find((a) => a.start >= m.up! && a.status < 300);
    const slowest503 = Math.max(0, ...unavailable.map((a) => a.end - a.start));
    console.log(
      `[F5] ${ops.length} operations, ${answers.length} answers; restart -m immediate took ` +
        `${(m.restartTo! - m.restartFrom!).toFixed(0)} ms, down ${(m.startFrom! - m.down!).toFixed(0)} ms; ` +
        `503s ${unavailable.length} (slowest ${slowest503.toFixed(0)} ms), ${whileDown.length} answers while down; ` +
        `first success ${firstOkAfterUp ? (firstOkAfterUp.end - m.up!).toFixed(0) : '-'} ms after start; ` +
        `begins re-entered with their own lease after a 503 ${reentered}; effects ${downstream.total()}`,
    );

    expect(unexpected).toEqual([]);
    // The service never dropped a connection, never died, never answered 500.
    expect(transport).toEqual([]);
    expect(replica.running).toBe(true);
    expect(replica.pid).toBe(pid);
    expect(answers.filter((a) => ![200, 201, 503].includes(a.status))).toEqual([]);

    // Fail fast while down: all 503 UNAVAILABLE, retryable, Retry-After, problem+json, quick.
    expect(whileDown.length).toBeGreaterThanOrEqual(5);
    expect(whileDown.filter((a) => a.status !== 503)).toEqual([]);
    expect(unavailable.length).toBeGreaterThan(0);
    for (const a of unavailable) {
      expect(a).toMatchObject({ code: 'UNAVAILABLE', retryable: true, retryAfter: '1' });
      expect(a.contentType).toContain('application/problem+json');
    }
    expect(slowest503).toBeLessThan(FAST_MS);

    // The pool recovered by itself: everything that started 2 s after the database was back succeeded.
    expect(firstOkAfterUp).toBeDefined();
    expect(answers.filter((a) => a.start >= m.up! + 2000 && a.status === 503)).toEqual([]);
    const ready = await send(replica.url, 'GET', '/readyz');
    expect(ready.status).toBe(200);

    // No acknowledged write lost, and each key's effect ran once.
    const acked = ops.filter((o) => o.ackedResult !== undefined);
    expect(acked.length).toBe(ops.length);
    for (const op of ops) {
      const g = await api.get(op.key);
      expect([
        op.key,
        g.status,
        g.body.operation?.status,
        g.body.operation?.attempt,
        g.body.operation?.result,
      ]).toEqual([op.key, 200, 'succeeded', 1, op.ackedResult]);
      expect([op.key, downstream.count(op.key)]).toEqual([op.key, 1]);
    }
    const db = new pg.Client({ connectionString: cluster.url('idem') });
    await db.connect();
    try {
      const { rows } = await db.query<{ key: string; types: string }>(
        `SELECT o.key, string_agg(e.type, ',' ORDER BY e.version) AS types FROM idem_operations o
         JOIN idem_events e ON e.operation_id = o.id GROUP BY o.key`,
      );
      expect(rows).toHaveLength(ops.length);
      expect(rows.filter((r) => r.types !== 'created,completed')).toEqual([]);
    } finally {
      await db.end();
    }
  }, 180_000);
});
