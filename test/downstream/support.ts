/**
 * Shared helpers of the downstream tests: a `PgLedger` on this file's own
 * database (a node-postgres pool on Postgres, the PGlite instance on the
 * embedded engine), and the service's own table it writes next to the ledger.
 */
import type { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { PgLedger } from '../../src/pg/index.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

export interface PgLedgerFixture {
  testDb: TestDatabase;
  ledger: PgLedger;
  /** Runs SQL on the same database, outside any ledger transaction. */
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** Another PgLedger on the same database (a second service process, in effect). */
  another(): PgLedger;
  close(): Promise<void>;
}

export async function pgLedgerFixture(actor = 'note-service'): Promise<PgLedgerFixture> {
  const testDb = await createTestDatabase();
  const pools: pg.Pool[] = [];
  const make = (): PgLedger => {
    if (testDb.url) {
      const pool = new pg.Pool({ connectionString: testDb.url, max: 6 });
      pools.push(pool);
      return new PgLedger({ pool, actor });
    }
    return new PgLedger({ pglite: (testDb.db.drizzle as unknown as { $client: PGlite }).$client, actor });
  };
  const ledger = make();
  const admin = testDb.url ? new pg.Pool({ connectionString: testDb.url, max: 2 }) : undefined;
  if (admin) pools.push(admin);
  const pglite = (testDb.db.drizzle as unknown as { $client: PGlite }).$client;
  return {
    testDb,
    ledger,
    query: async <R>(text: string, params: unknown[] = []) =>
      admin ? ((await admin.query(text, params)).rows as R[]) : (await pglite.query<R>(text, params)).rows,
    another: make,
    close: async () => {
      await Promise.all(pools.map((p) => p.end().catch(() => {})));
      await testDb.drop();
    },
  };
}

export const NOTES_TABLE = `CREATE TABLE IF NOT EXISTS notes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  folder_id text NOT NULL,
  text text NOT NULL)`;
