/**
 * Applies the drizzle-kit migrations in `drizzle/`. Runs at start and with
 * `npm run migrate`. On Postgres, replicas starting together serialise on an
 * advisory lock held by one dedicated connection (not the hot path). On Citus
 * (detected by its extension) the tables are then distributed by `scope`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import { distributeOnCitus } from './citus.js';
import type { Database } from './database.js';

/** The folder sits two levels above this file, in `src/db` and in `dist/db` alike. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** An arbitrary constant: the advisory lock key of "migrations in progress". */
const MIGRATION_LOCK = 7_220_614_001;

export function expectedMigrations(): number {
  const journal = JSON.parse(readFileSync(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')) as {
    entries: unknown[];
  };
  return journal.entries.length;
}

export async function migrateDatabase(db: Database, databaseUrl?: string): Promise<void> {
  if (db.kind === 'pglite') {
    await migratePglite(db.drizzle as Parameters<typeof migratePglite>[0], {
      migrationsFolder: MIGRATIONS_FOLDER,
    });
    return;
  }
  if (!databaseUrl) throw new Error('migrating Postgres needs its URL');
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    await migrateOnClient(client);
  } finally {
    await client.end();
  }
}

/**
 * The migrations on one dedicated connection (a session advisory lock must be
 * held and released on the same one): the service's start and `idem/pg`'s
 * `PgLedger.migrate()` serialise on the same lock.
 */
export async function migrateOnClient(client: pg.Client | pg.PoolClient): Promise<void> {
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await migratePg(drizzlePg({ client }), { migrationsFolder: MIGRATIONS_FOLDER });
    await distributeOnCitus(client);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
  }
}

/** Readiness: reachable, and every migration of this build applied. */
export async function migrationsApplied(db: Database): Promise<boolean> {
  // Two statements: a query naming a missing table fails to plan even in a branch never taken.
  const [table] = await db.rows<{ t: string | null }>(
    sql`SELECT to_regclass('drizzle.__drizzle_migrations')::text AS t`,
  );
  if (!table?.t) return false;
  const rows = await db.rows<{ n: number }>(sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`);
  return (rows[0]?.n ?? 0) >= expectedMigrations();
}
