/**
 * Citus, detected by the migrations (issue 11): on a Citus coordinator the
 * ledger's tables are hash-distributed by `scope`, co-located, idempotently;
 * on plain Postgres nothing changes. On Citus, every statement of the hot path
 * (one `(scope, key)`) must be planned on one shard: each HTTP call runs on a
 * Database that EXPLAINs every statement first.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { distributeOnCitus, hasCitus } from '../../src/db/citus.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { buildApp } from '../../src/http/app.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onCitus, onPostgres } from '../support/engine.js';
import { explaining, isSingleShard } from '../support/explain.js';
import { client, expireLease } from '../support/http.js';

let testDb: TestDatabase;
let admin: pg.Client;

async function placements(): Promise<
  { table: string; column: string; method: string; colocation: number }[]
> {
  const { rows } = await admin.query(
    `SELECT logicalrelid::regclass::text AS table, column_to_column_name(logicalrelid, partkey) AS column,
            partmethod AS method, colocationid AS colocation
       FROM pg_dist_partition
      WHERE logicalrelid IN (to_regclass('idem_operations'), to_regclass('idem_events'))
      ORDER BY 1`,
  );
  return rows;
}

beforeAll(async () => {
  if (!onPostgres()) return;
  testDb = await createTestDatabase();
  admin = new pg.Client({ connectionString: testDb.url });
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await testDb?.drop();
});

describe.skipIf(!onPostgres() || onCitus())('on plain Postgres', () => {
  it('nothing is distributed and the Citus step does nothing', async () => {
    expect(await hasCitus(admin)).toBe(false);
    expect(await distributeOnCitus(admin)).toEqual([]);
    const { rows } = await admin.query(`SELECT to_regclass('pg_dist_partition') AS t`);
    expect(rows[0].t).toBeNull();
  });
});

describe.skipIf(!onCitus())('on Citus: the migrations distribute the tables', () => {
  it('idem_operations and idem_events are hash-distributed by scope and co-located', async () => {
    const p = await placements();
    expect(p.map(({ table, column, method }) => ({ table, column, method }))).toEqual([
      { table: 'idem_events', column: 'scope', method: 'h' },
      { table: 'idem_operations', column: 'scope', method: 'h' },
    ]);
    expect(p[0]!.colocation).toBe(p[1]!.colocation);
  });

  it('re-running is harmless: nothing is distributed again, the migrator changes nothing', async () => {
    const before = await placements();
    expect(await distributeOnCitus(admin)).toEqual([]);
    const db = testDb.openAnother();
    await migrateDatabase(db, testDb.url);
    expect(await placements()).toEqual(before);
  });

  it('a table distributed another way stops the migration with what differs, and is left as it was', async () => {
    await admin.query(`SELECT undistribute_table('idem_events')`);
    await admin.query(`SELECT create_distributed_table('idem_events', 'id', colocate_with => 'none')`);
    await expect(distributeOnCitus(admin)).rejects.toThrow(/idem_events .*not hash-distributed by scope/);
    expect((await placements()).find((r) => r.table === 'idem_events')?.column).toBe('id');

    await admin.query(`SELECT undistribute_table('idem_events')`);
    await admin.query(`SELECT create_distributed_table('idem_events', 'scope', colocate_with => 'none')`);
    await expect(distributeOnCitus(admin)).rejects.toThrow(/not co-located with idem_operations/);

    await admin.query(`SELECT undistribute_table('idem_events')`);
    expect(await distributeOnCitus(admin)).toEqual(['idem_events']);
    const p = await placements();
    expect(p[0]!.colocation).toBe(p[1]!.colocation);
  });
});

/** Calls on one `(scope, key)`: each of their statements must be router-planned. */
const HOT = [
  'begin: new key',
  'begin: in progress',
  'begin: other fingerprint',
  'dispatch',
  'heartbeat',
  'complete',
  'begin: replay',
  'release',
  'begin: ready again',
  'unknown',
  'begin: outcome unknown',
  'resolve',
  'begin: lapsed lease',
  'begin: pending approval',
  'approve',
  'reject',
  'get by key',
  'events',
];

describe.skipIf(!onCitus())('on Citus: every statement about one key runs on one shard', () => {
  it('EXPLAIN shows one task per step for every hot call', async () => {
    const ex = explaining(testDb.openAnother(), testDb.url!);
    const app = await buildApp({ db: ex.db, keys: new KeyStore([]), logger: false });
    await app.ready();
    try {
      const api = client(app, 'orders');
      const call = async (label: string, fn: () => Promise<unknown>) => {
        ex.label(label);
        try {
          return await fn();
        } finally {
          ex.label('setup');
        }
      };
      // A call that fails still leaves its plans; a missing lease must not stop the walk.
      const leaseOf = (r: unknown) =>
        (r as { body: { lease?: { id: string } } }).body.lease?.id ?? randomUUID();
      const key = `citus/${randomUUID()}`;
      const leaseId = leaseOf(await call('begin: new key', () => api.begin({ key, request: { n: 1 } })));
      await call('begin: in progress', () => api.begin({ key, request: { n: 1 } }));
      await call('begin: other fingerprint', () => api.begin({ key, request: { n: 2 } }));
      await call('dispatch', () => api.dispatch(key, leaseId));
      await call('heartbeat', () => api.heartbeat(key, leaseId));
      await call('complete', () => api.complete(key, leaseId, 'succeeded', { ok: true }));
      await call('begin: replay', () => api.begin({ key, request: { n: 1 } }));
      await call('get by key', () => api.get(key));
      await call('events', () => api.events(key));

      const k2 = `citus/${randomUUID()}`;
      const b = await api.begin({ key: k2, request: {}, dispatch: false });
      await call('release', () => api.release(k2, leaseOf(b)));
      const c = await call('begin: ready again', () => api.begin({ key: k2, request: {} }));
      await call('unknown', () => api.unknown(k2, leaseOf(c)));
      await call('begin: outcome unknown', () => api.begin({ key: k2, request: {} }));
      await call('resolve', () => api.resolve(k2, { status: 'succeeded', note: 'checked', result: {} }));

      const k3 = `citus/${randomUUID()}`;
      await api.begin({ key: k3, request: {}, effect: 'read' });
      await expireLease(testDb.db, 'orders', k3);
      await call('begin: lapsed lease', () => api.begin({ key: k3, request: {}, effect: 'read' }));

      const k4 = `citus/${randomUUID()}`;
      const k5 = `citus/${randomUUID()}`;
      await call('begin: pending approval', () => api.begin({ key: k4, request: {}, requireApproval: true }));
      await api.begin({ key: k5, request: {}, requireApproval: true });
      await call('approve', () => api.approve(k4, { note: 'ok' }));
      await call('reject', () => api.reject(k5, { note: 'no' }));

      // Not about one key: recorded for the findings, not asserted.
      const op = (await api.get(key)) as { body: { operation?: { id: string } } };
      await call('get by id', () => api.getById(op.body.operation?.id ?? randomUUID()));
      await call('list', () => api.call('GET', '/v1/operations?scope=orders&limit=10'));
      await call('stats', () => api.call('GET', '/v1/stats'));
      ex.label('sweeper');
      // Recorded even when Citus refuses it (the plan record keeps the error).
      await sweepOnce(ex.db, loadConfig({}).sweep).catch(() => {});

      const summary = ex.plans.map(
        (p) =>
          `${p.label.padEnd(24)} ${!isSingleShard(p) ? 'MULTI  ' : p.tasks.length ? 'router ' : 'local  '} tasks=${p.tasks.join('/') || '-'} ` +
          `subplans=${p.subplans}${p.error ? ` ERROR ${p.error}` : ''} :: ${p.text.slice(0, 100)}`,
      );
      console.log(`[citus plans]\n${summary.join('\n')}`);
      const hot = ex.plans.filter((p) => HOT.includes(p.label));
      for (const label of HOT)
        expect(
          hot.some((p) => p.label === label),
          label,
        ).toBe(true);
      const offenders = hot.filter((p) => !isSingleShard(p)).map((p) => summary[ex.plans.indexOf(p)]);
      expect(offenders).toEqual([]);
    } finally {
      await app.close();
      await ex.close();
    }
  });
});
