/**
 * A `Database` bound to ONE connection (a node-postgres client checked out of
 * a pool, or a PGlite transaction), so the ledger's own statements can run
 * inside a caller's transaction: `PgLedger` registers an operation, runs the
 * service's writes and stores the result on one connection, then commits.
 *
 * Rows are read through drizzle exactly as `database.ts` reads them (same
 * type parsers), so a statement returns the same shape on either seam. No
 * re-runs here: a 40001/40P01 inside a transaction aborts the whole
 * transaction, and only its owner can run it again from BEGIN.
 */
import type { PGlite, Transaction } from '@electric-sql/pglite';
import type { SQL } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import type pg from 'pg';
import type { Database } from './database.js';
import type { PgliteRun } from './pglite-statements.js';
import { bind, type Statement } from './statement.js';
import { type PgQueryable, runStatement } from './statement-query.js';

export type { PgQueryable };

/**
 * A `Database` over one node-postgres client (or a pool, one statement per
 * checkout). It does not own the connection: `close()` leaves it open.
 * `prepared: false` sends hot-path statements unnamed (as `IDEM_DB_PREPARED=false`).
 */
export function clientDatabase(client: PgQueryable, options: { prepared?: boolean } = {}): Database {
  const db = drizzlePg({ client: client as pg.Pool });
  const named = options.prepared ?? true;
  return {
    kind: 'postgres',
    drizzle: db,
    async rows<T>(query: SQL) {
      return (await db.execute(query)).rows as T[];
    },
    run: <T>(st: Statement, values: Readonly<Record<string, unknown>>) =>
      runStatement<T>(client, st, values, named),
    poolStats: () => ({ total: 1, idle: 0, waiting: 0 }),
    close: async () => {},
  };
}

/**
 * A `Database` over a PGlite transaction (or the PGlite instance itself).
 * PGlite runs one query at a time, so its transactions never wait on each
 * other: they are serialised whole. Hot-path statements run through `named`
 * (`pglite-statements.ts`, made for the same transaction or instance) when
 * given, else unnamed through `query()`.
 */
export function pgliteTxDatabase(tx: Transaction | PGlite, named?: PgliteRun): Database {
  // drizzle only calls `query(text, params, options)`, which a Transaction has too.
  const db = drizzlePglite({ client: tx as PGlite });
  return {
    kind: 'pglite',
    drizzle: db,
    async rows<T>(query: SQL) {
      return (await db.execute(query)).rows as T[];
    },
    async run<T>(st: Statement, values: Readonly<Record<string, unknown>>) {
      if (named) return named<T>(st, values);
      return (await tx.query<T>(st.text, bind(st, values))).rows;
    },
    poolStats: () => ({ total: 1, idle: 0, waiting: 0 }),
    close: async () => {},
  };
}
