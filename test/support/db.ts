/**
 * One isolated database per test file: on Postgres a clone of the migrated
 * template (CREATE DATABASE ... TEMPLATE), on the embedded engine a fresh
 * in-memory PGlite with the migrations applied, on Citus a schema of its own
 * with the tables distributed (citus.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { type Database, pgliteDatabase, postgresDatabase } from '../../src/db/database.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { createCitusSchema, dropCitusSchema, withSearchPath } from './citus.js';
import { currentEngine } from './engine.js';
import { templateName, withDatabase } from './global-setup.js';

export interface TestDatabase {
  db: Database;
  /** Postgres only: the URL, for more pools (replicas) on the same database. */
  url?: string;
  /** Another pool on the same database (a second service replica). */
  openAnother(settings?: Partial<ReturnType<typeof loadConfig>['db']>): Database;
  drop(): Promise<void>;
}

/** One administrative connection to the server at `url`, closed after `fn`. */
export async function withAdmin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function cloneTemplate(url: string, name: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await withAdmin(url, (c) => c.query(`CREATE DATABASE "${name}" TEMPLATE "${templateName()}"`));
      return;
    } catch (err) {
      // 55006: the template is being copied by a parallel test file right now.
      if ((err as { code?: string }).code !== '55006' || i > 50) throw err;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
}

/**
 * Drops a test database. node-postgres's `pool.end()` resolves before its
 * clients' connections have closed; a forced drop that terminates one of them
 * meanwhile makes the client emit 57P01 (terminating connection due to
 * administrator command) through its pool, and a pool without an 'error'
 * listener (a test's own) throws it as an uncaught exception. So the drop
 * first waits, briefly, for the database's sessions to end by themselves,
 * and forces only what is left after that.
 */
export async function dropDatabase(url: string, name: string): Promise<void> {
  await withAdmin(url, async (c) => {
    for (let i = 0; i < 20; i++) {
      const r = await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
      if (r.rows[0].n === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
}

/** `settings` adjusts the pools (e.g. a longer wait for a connection on a loaded test machine). */
export async function createTestDatabase(
  overrides: Partial<ReturnType<typeof loadConfig>['db']> = {},
): Promise<TestDatabase> {
  const engine = currentEngine();
  const settings = { ...loadConfig({}).db, ...overrides };
  if (engine.kind === 'pglite') {
    const db = await pgliteDatabase(undefined, { prepared: settings.prepared });
    await migrateDatabase(db);
    return {
      db,
      openAnother: () => {
        throw new Error('the embedded engine is one process: no second replica');
      },
      drop: () => db.close(),
    };
  }
  const name = `idem_t_${randomBytes(6).toString('hex')}`;
  if (engine.citus) await createCitusSchema(engine.url, name);
  else await cloneTemplate(engine.url, name);
  const url = engine.citus ? withSearchPath(engine.url, name) : withDatabase(engine.url, name);
  const pools: Database[] = [];
  const open = (s: Partial<typeof settings> = {}) => {
    const d = postgresDatabase(url, { ...settings, ...s });
    // As the service does once the database answers (`enableCoalescing`): on, except on Citus.
    if (d.coalesce) d.coalesce.enabled = !engine.citus;
    pools.push(d);
    return d;
  };
  const db = open();
  return {
    db,
    url,
    openAnother: open,
    drop: async () => {
      await Promise.all(pools.map((p) => p.close().catch(() => {})));
      if (engine.citus) await dropCitusSchema(engine.url, name);
      else await dropDatabase(engine.url, name);
    },
  };
}
