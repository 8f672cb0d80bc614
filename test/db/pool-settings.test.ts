/**
 * The session settings every pooled connection starts with (`createPgPool`):
 * the timeouts, the application name, and no JIT. JIT is checked by its
 * effect: with the database set to JIT everything (`jit_above_cost = 0`), a
 * connection of node-postgres's defaults JIT-compiles the sweeper's batch and
 * a pooled one does not.
 */
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createPgPool } from '../../src/db/database.js';
import { bind, declaredStatements } from '../../src/db/statement.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onCitus, onPostgres } from '../support/engine.js';
import '../../src/ledger/sql/lapse.js';

const settings = loadConfig({}).db;

// Not on Citus: there every test file shares the coordinator's database (a schema each), and
// this file sets a database-wide setting.
describe.skipIf(!onPostgres() || onCitus())('pooled connections', () => {
  let t: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    t = await createTestDatabase();
    // Read by every connection opened after it: the pool below and the control client.
    await t.db.rows(
      sql`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET jit_above_cost = 0', current_database()); END $$`,
    );
    pool = createPgPool(t.url!, settings);
  });
  afterAll(async () => {
    await pool?.end();
    await t?.drop();
  });

  it('start with the configured timeouts and name', async () => {
    // pg_settings.setting is in the setting's own unit: milliseconds for these three.
    const r = await pool.query(
      `SELECT max(setting) FILTER (WHERE name = 'statement_timeout') AS st,
              max(setting) FILTER (WHERE name = 'lock_timeout') AS lt,
              max(setting) FILTER (WHERE name = 'idle_in_transaction_session_timeout') AS it,
              max(setting) FILTER (WHERE name = 'application_name') AS app,
              max(setting) FILTER (WHERE name = 'jit') AS jit
       FROM pg_settings`,
    );
    expect(r.rows[0]).toEqual({
      st: String(settings.statementTimeoutMs),
      lt: String(settings.lockTimeoutMs),
      it: String(settings.idleInTransactionTimeoutMs),
      app: 'idem',
      jit: 'off',
    });
  });

  it('never JIT-compile a statement, where a default connection would', async (ctx) => {
    const lapse = declaredStatements().get('lapse_batch');
    if (!lapse) throw new Error('lapse_batch is not declared');
    const explain = `EXPLAIN (ANALYZE, FORMAT JSON) ${lapse.text}`;
    const values = bind(lapse, { limit: 500, actor: 'test', afterUs: null });
    const jitOf = async (q: pg.Pool | pg.Client) =>
      ((await q.query(explain, values)).rows[0]['QUERY PLAN'][0] as { JIT?: unknown }).JIT;

    const plain = new pg.Client({ connectionString: t.url });
    await plain.connect();
    try {
      const available = (await plain.query('SELECT pg_jit_available() AS a')).rows[0].a as boolean;
      if (!available) ctx.skip(); // a server built without LLVM: nothing to turn off
      expect(await jitOf(plain), 'the control: a default connection JITs').toBeDefined();
    } finally {
      await plain.end();
    }
    expect(await jitOf(pool)).toBeUndefined();
  });
});
