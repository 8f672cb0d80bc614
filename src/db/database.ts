/**
 * The narrow database seam: one `Database` over either engine.
 *
 * Every query function takes a `Database` first and runs drizzle `sql`
 * templates through `rows()`. Both engines speak the same SQL; only the
 * driver differs (node-postgres with a bounded pool, or PGlite in-process).
 */
import type { PGlite } from '@electric-sql/pglite';
import type { SQL } from 'drizzle-orm';
import type { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import pg from 'pg';
import type { Config } from '../config.js';
import { clientDatabase } from './client-database.js';
import { lockDataDir } from './data-dir-lock.js';
import { isRerunnable } from './errors.js';
import { pgliteStatements } from './pglite-statements.js';
import { bind, type Statement } from './statement.js';

export type EngineKind = 'postgres' | 'pglite';

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface Database {
  readonly kind: EngineKind;
  /** Runs one statement and returns its rows. */
  rows<T>(query: SQL): Promise<T[]>;
  /**
   * Runs a hot-path statement with its parameters: a named prepared statement
   * on Postgres (parsed and planned once per connection) unless turned off.
   */
  run<T>(st: Statement, values: Readonly<Record<string, unknown>>): Promise<T[]>;
  /**
   * Coalescing (`coalesce.ts`): present on a pooled Postgres database with
   * `IDEM_DB_COALESCE` above 0; `enabled` once the database is known not to be
   * Citus (`awaitDatabase`). Absent on a database bound to one connection.
   */
  readonly coalesce?: Coalescing;
  /** The drizzle handle, for the migrator. */
  readonly drizzle: ReturnType<typeof drizzlePg> | ReturnType<typeof drizzlePglite>;
  poolStats(): PoolStats;
  close(): Promise<void>;
}

export type DbSettings = Config['db'];

export interface Coalescing {
  /** Statements of one kind in flight before the next ones are folded. */
  readonly inFlight: number;
  enabled: boolean;
}

/** A node-postgres pool with every timeout set: none of them has a default. */
export function createPgPool(url: string, s: DbSettings, onError?: (err: Error) => void): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: s.poolMax,
    // Also bounds how long a request waits for a free client when the pool is
    // exhausted: the excess fails fast with 503 instead of queueing forever.
    connectionTimeoutMillis: s.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: s.statementTimeoutMs,
    lock_timeout: s.lockTimeoutMs,
    idle_in_transaction_session_timeout: s.idleInTransactionTimeoutMs,
    // Client-side guard for a server that stopped answering (no RST, no FIN).
    query_timeout: s.statementTimeoutMs + 2000,
    application_name: 'idem',
    // No JIT: every statement here touches a handful of rows, and Postgres compiles JIT code
    // afresh on each execution. The sweeper's batch (500 rows) crossed jit_above_cost and
    // spent 28 of its 60 ms compiling. A connection string's own `options` replaces this.
    options: '-c jit=off',
    keepAlive: true,
  });
  // An idle client whose server went away emits 'error' on the pool; without a
  // listener that would crash the process. The pool drops the client itself.
  pool.on('error', (err) => onError?.(err));
  return pool;
}

/** Re-runs of a statement the database rolled back (serialization failure, deadlock). */
const RERUNS = 4;

/**
 * Runs `run` again when the database rolled it back (serialization failure,
 * deadlock), up to `RERUNS` times with full jitter. Only for work that is safe
 * to re-run whole: one statement, or a transaction from its BEGIN.
 */
export async function rerunning<T>(run: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await run();
    } catch (err) {
      if (i >= RERUNS || !isRerunnable(err)) throw err;
      // Full jitter: two sweepers that deadlocked must not collide again in step.
      await new Promise((r) => setTimeout(r, Math.random() * 20 * 2 ** i));
    }
  }
}

/** `db` whose every statement is re-run when the database rolled it back (each is atomic). */
export function withReruns(db: Database): Database {
  return {
    ...db,
    rows: (query) => rerunning(() => db.rows(query)),
    run: (st, values) => rerunning(() => db.run(st, values)),
  };
}

export function postgresDatabase(url: string, s: DbSettings, onError?: (err: Error) => void): Database {
  const pool = createPgPool(url, s, onError);
  return withReruns({
    ...clientDatabase(pool, { prepared: s.prepared }),
    ...(s.coalesce > 0 && { coalesce: { inFlight: s.coalesce, enabled: false } }),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  });
}

/**
 * The embedded engine. PGlite serialises every query: fine for one process, not for load.
 * A data folder is locked for this process (a second one gets a `ConfigError` naming it).
 * Hot-path statements run as named prepared statements (`pglite-statements.ts`) unless
 * `prepared` is false (`IDEM_DB_PREPARED`), then through PGlite's `query()`, unnamed.
 */
export async function pgliteDatabase(
  dataDir: string | undefined,
  options: { prepared?: boolean } = {},
): Promise<Database> {
  const { PGlite } = await import('@electric-sql/pglite');
  const unlock = dataDir ? lockDataDir(dataDir) : () => {};
  let client: PGlite;
  try {
    client = dataDir ? new PGlite(dataDir) : new PGlite();
    await client.waitReady;
  } catch (err) {
    unlock();
    throw err;
  }
  const db = drizzlePglite({ client });
  const named = (options.prepared ?? true) ? pgliteStatements(client) : undefined;
  return {
    kind: 'pglite',
    drizzle: db,
    async rows<T>(query: SQL) {
      const res = await db.execute(query);
      return res.rows as T[];
    },
    async run<T>(st: Statement, values: Readonly<Record<string, unknown>>) {
      if (named) return named<T>(st, values);
      const res = await client.query<T>(st.text, bind(st, values));
      return res.rows;
    },
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    close: () => client.close().finally(unlock),
  };
}

/** Postgres when `DATABASE_URL` is set, else the embedded engine in `IDEM_DATA_DIR`. */
export async function openDatabase(config: Config, onError?: (err: Error) => void): Promise<Database> {
  if (config.databaseUrl) return postgresDatabase(config.databaseUrl, config.db, onError);
  const { mkdir } = await import('node:fs/promises');
  await mkdir(config.dataDir, { recursive: true });
  return pgliteDatabase(config.dataDir, { prepared: config.db.prepared });
}
