/**
 * The bench's own database: created fresh per run (`idem_bench_<timestamp>`),
 * migrated with the service's migrations, dropped at the end. Also the
 * fixtures that are too large to make through the API (S4, S5).
 */
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { postgresDatabase } from '../../src/db/database.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { effStatus } from '../../src/ledger/sql/row.js';
import { orderedUuid } from './scripts.js';

export function withDatabaseName(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export interface ServerInfo {
  version: string;
  settings: Record<string, string>;
}

/**
 * Whether the bench stands in for autovacuum (`VACUUM (ANALYZE)` before each
 * scenario): only where the server runs without it.
 */
export function vacuumsForServer(settings: ServerInfo['settings']): boolean {
  return settings.autovacuum === 'off';
}

export class BenchDatabase {
  private constructor(
    readonly adminUrl: string,
    readonly name: string,
    readonly url: string,
    readonly pool: pg.Pool,
  ) {}

  /** Set by `drop()`: the connections it ends may still report their termination. */
  private dropping = false;

  /** CREATE DATABASE, then the service's own migrations. */
  static async create(adminUrl: string, stamp: string): Promise<BenchDatabase> {
    const name = `idem_bench_${stamp.replace(/[^0-9a-z]/gi, '').toLowerCase()}`;
    await withClient(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
    const url = withDatabaseName(adminUrl, name);
    const db = postgresDatabase(url, loadConfig({}).db);
    try {
      await migrateDatabase(db, url);
    } finally {
      await db.close();
    }
    const pool = new pg.Pool({ connectionString: url, max: 3, application_name: 'idem-bench' });
    const bench = new BenchDatabase(adminUrl, name, url, pool);
    // An idle client's connection can fail under the pool, which then drops the client
    // and emits the error; with no listener that would end the process before the run's
    // results are written. It happens at `drop()`: pg-pool's end() resolves before its
    // clients' sockets have closed, so DROP ... WITH (FORCE) can still terminate one of
    // their backends (57P01), whose message reaches a client already let go.
    pool.on('error', (err) => {
      if (!bench.dropping) process.stderr.write(`[bench] an idle bench connection failed: ${err.message}\n`);
    });
    return bench;
  }

  async query<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
    return (await this.pool.query<T>(text, params)).rows;
  }

  async serverInfo(): Promise<ServerInfo> {
    const names = [
      'synchronous_commit',
      'fsync',
      'shared_buffers',
      'max_connections',
      'wal_level',
      'autovacuum',
    ];
    const rows = await this.query<{ name: string; setting: string; unit: string | null }>(
      'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)',
      [names],
    );
    const version = (await this.query<{ v: string }>('SELECT version() AS v'))[0]!.v;
    return {
      version,
      settings: Object.fromEntries(rows.map((r) => [r.name, r.unit ? `${r.setting} ${r.unit}` : r.setting])),
    };
  }

  /**
   * What autovacuum would have done by now, for a server that runs without it:
   * the ledger is update-heavy (every complete and lapse leaves a dead version
   * and dead index entries), and with nothing removing them each scenario
   * inherits all the earlier ones' (see `bench/README.md`).
   */
  async vacuumAnalyze(): Promise<void> {
    await this.pool.query('VACUUM (ANALYZE)');
  }

  /** Both sides of a comparison start from flushed buffers, not from the other's dirty pages. */
  async checkpoint(): Promise<void> {
    await this.pool.query('CHECKPOINT');
  }

  /** WAL files in the server's `pg_wal` that lie ahead of the one being written: those it will reuse. */
  async walFilesAhead(): Promise<number> {
    const [r] = await this.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_ls_waldir()
        WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_lsn())`,
    );
    return r!.n;
  }

  /**
   * Leaves the server with WAL files to reuse, as one that has carried a steady load
   * for a while keeps them (up to `max_wal_size`). Postgres recycles a file at a
   * checkpoint for as much WAL as it expects before the next one (its estimate of
   * the distance between checkpoints); the paired figures' `CHECKPOINT` before every
   * run, a few megabytes apart, shrink that estimate, and with it the files kept. A
   * burst of WAL (S5's drain writes 20 MB/s and more) then creates each new file
   * under the WAL write lock: 16 MB zero-filled and synced, which every commit waits
   * for. Switching to a new file `max_wal_size` worth of times and then checkpointing
   * sets the estimate to that distance and recycles those files for reuse. Returns
   * the files ahead before and after.
   */
  async steadyWalFiles(): Promise<{ before: number; after: number; switched: number }> {
    const before = await this.walFilesAhead();
    // One statement: each row writes a record into the current file (so that the switch has
    // something to close) and switches; as many rows as `max_wal_size` holds files, at most 256.
    const [r] = await this.query<{ switched: number }>(
      `SELECT count(pg_switch_wal())::int AS switched FROM (
         SELECT pg_logical_emit_message(false, 'idem-bench', '')
           FROM generate_series(1, LEAST(256,
             (SELECT setting::bigint FROM pg_settings WHERE name = 'max_wal_size') * 1024 * 1024
               / (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')))
       ) m`,
    );
    const switched = r!.switched;
    await this.checkpoint();
    return { before, after: await this.walFilesAhead(), switched };
  }

  async drop(): Promise<void> {
    this.dropping = true;
    await this.pool.end().catch(() => {});
    await withClient(this.adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${this.name}" WITH (FORCE)`));
  }

  /** Operations of `scope` whose key's second segment is `tag` (`<hex>/<tag>/...`), by stored status. */
  async countByStatus(scope: string, tag: string): Promise<Record<string, number>> {
    const rows = await this.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM idem_operations
       WHERE scope = $1 AND split_part(key, '/', 2) = $2 GROUP BY status`,
      [scope, tag],
    );
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /**
   * S5's watcher: whether any lapse of the fixture `tag` is still due, by the
   * service's own lapse rule. It asks for one row, through the partial index
   * of in-progress leases, from the oldest expiry: the sweeper drains oldest
   * first, so while the backlog lasts the first row answers, and the watcher
   * costs next to nothing. (It used to count every row of the scope by the
   * rule, five times a second: 52-59 ms a call on 300,000 rows, a quarter of
   * one core, taken from S1 during the drain only.)
   */
  async lapseDue(scope: string, tag: string): Promise<boolean> {
    const rows = await this.query<{ due: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM idem_operations o
         WHERE o.status = 'in_progress' AND o.lease_expires_at <= now()
           AND scope = $1 AND split_part(key, '/', 2) = $2 AND ${effStatus('o', 'now()')} <> o.status) AS due`,
      [scope, tag],
    );
    return rows[0]!.due;
  }

  /**
   * S5: `count` leases that expired over the 10 s before the insert, half never
   * dispatched (they lapse to `ready`), half dispatched non-idempotent writes (to
   * `outcome_unknown`), as a crashed fleet of workers would leave them. A lease
   * is written live and runs out later, so a sweeper meets a backlog as leases
   * that expired lately; the sweeper's scan floor trails the clock by a minute
   * for that (`LeaseScanFloor`). Leases inserted already a minute past their
   * expiry, which no write of the service makes, wait for its full scan, once a
   * minute. Their ids are time-ordered like the service's (UUIDv7), a
   * millisecond apart.
   */
  async insertExpiredLeases(scope: string, tag: string, count: number, fingerprint: string, request: string) {
    await this.query(
      `INSERT INTO idem_operations (scope, key, id, fingerprint, effect, status, attempt, version,
         lease_id, lease_owner, lease_expires_at, dispatched_at, lease_recovered, request, metadata,
         retention_ms, created_at, updated_at)
       SELECT $1, 'x/' || $2 || '/' || i, ${orderedUuid(`now() - interval '2 minutes' - i * interval '1 millisecond'`)}, $3,
         'non_idempotent_write', 'in_progress', 1, 1,
         gen_random_uuid(), 'crashed-worker', now() - (i::float8 / $5) * interval '10 seconds',
         CASE WHEN i % 2 = 0 THEN now() - interval '2 minutes' END, false, $4::jsonb, '{}'::jsonb,
         86400000, now() - interval '2 minutes', now() - interval '2 minutes'
       FROM generate_series(1, $5::int) AS i`,
      [scope, tag, fingerprint, request, count],
    );
  }

  /**
   * S4: `rows` operations (90% succeeded, 5% failed, 3% ready, 2% in progress
   * with a live lease) and two events each, keys scattered over the key space.
   * Indexes are dropped and rebuilt in the same transaction from their own
   * definitions (`pg_get_indexdef`), which is ~3x faster than inserting
   * through them and leaves the migrated schema exactly as it was.
   */
  async insertLargeLedger(
    scope: string,
    rows: number,
    fingerprint: string,
    request: string,
    result: string,
    progress: (msg: string) => void,
  ): Promise<void> {
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      await c.query(`SET LOCAL maintenance_work_mem = '256MB'`);
      const defs = await c.query<{
        tbl: string;
        idx: string;
        def: string;
        con: string | null;
        condef: string;
      }>(
        `SELECT i.indrelid::regclass::text AS tbl, i.indexrelid::regclass::text AS idx,
           pg_get_indexdef(i.indexrelid) AS def, con.conname AS con, pg_get_constraintdef(con.oid) AS condef
         FROM pg_index i LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype = 'p'
         WHERE i.indrelid IN ('idem_operations'::regclass, 'idem_events'::regclass)`,
      );
      for (const d of defs.rows) {
        await c.query(d.con ? `ALTER TABLE ${d.tbl} DROP CONSTRAINT ${d.con}` : `DROP INDEX ${d.idx}`);
      }
      const chunk = 1_000_000;
      for (let from = 1; from <= rows; from += chunk) {
        const to = Math.min(rows, from + chunk - 1);
        const t = Date.now();
        // One statement per chunk: the events take their operation's id from RETURNING.
        await c.query(
          `WITH ops AS (
             INSERT INTO idem_operations (scope, key, id, fingerprint, effect, status, attempt, version,
               lease_id, lease_owner, lease_expires_at, dispatched_at, lease_recovered, request, result,
               metadata, retention_ms, created_at, updated_at, completed_at, retained_until)
             SELECT $1, to_hex((i * 2654435761) % 4294967296) || '/large/' || i, ${orderedUuid('t.at')}, $2,
               'non_idempotent_write', s.status, 1, 2, gen_random_uuid(), 'worker-7',
               CASE WHEN s.status = 'in_progress' THEN now() + interval '2 hours' ELSE t.at + interval '30 s' END,
               t.at, false, $3::jsonb, CASE WHEN s.status IN ('succeeded', 'failed') THEN $4::jsonb END,
               '{}'::jsonb, 2592000000, t.at, t.at,
               CASE WHEN s.status IN ('succeeded', 'failed') THEN t.at END,
               CASE WHEN s.status <> 'in_progress' THEN now() + interval '29 days' END
             FROM generate_series($5::bigint, $6::bigint) AS i,
               LATERAL (SELECT now() - (i % 86400) * interval '1 second' AS at) t,
               LATERAL (SELECT CASE WHEN i % 100 < 90 THEN 'succeeded' WHEN i % 100 < 95 THEN 'failed'
                 WHEN i % 100 < 98 THEN 'ready' ELSE 'in_progress' END AS status) s
             RETURNING scope, id, key, created_at)
           INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
           SELECT ops.scope, ${orderedUuid('ops.created_at')}, ops.id, ops.key, v,
             CASE v WHEN 1 THEN 'created' ELSE 'completed' END, ops.created_at, 'anonymous', 1, '{}'::jsonb
           FROM ops CROSS JOIN generate_series(1, 2) AS v`,
          [scope, fingerprint, request, result, from, to],
        );
        progress(`  ${to.toLocaleString('en')} / ${rows.toLocaleString('en')} rows (${Date.now() - t} ms)`);
      }
      const t = Date.now();
      for (const d of defs.rows) {
        await c.query(d.con ? `ALTER TABLE ${d.tbl} ADD CONSTRAINT ${d.con} ${d.condef}` : d.def);
      }
      await c.query('COMMIT');
      progress(`  indexes rebuilt (${Date.now() - t} ms)`);
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      c.release();
    }
    await this.query('VACUUM (ANALYZE) idem_operations');
    await this.query('VACUUM (ANALYZE) idem_events');
  }
}
