/**
 * Every named statement that addresses one operation reaches its row by the
 * primary key `(scope, key)` (`read_by_id` by the id index) under the
 * statistics that mislead a status guard. A status guard beside the key (`... AND status =
 * 'in_progress'`) would let the planner trade the key for a partial index
 * whose predicate the guard implies: on statistics that show few rows in
 * progress it prices that index as nearly empty, then walks every entry it
 * holds (one per begin since the last vacuum) on each call. The service's
 * statements avoid it by finding the row by the key alone (their `cur`) and
 * applying the rules to that row; the benchmark's floor had that plan until
 * 2026-12-05 (docs/performance.md, "The floor's plan").
 *
 * The ledger here holds 30,000 operations, every one completed, first never
 * analyzed, then analyzed: the two states in which the planner takes a
 * partial index for such a guard. A control statement with the plain guard
 * proves the states are adverse. Each plan is the generic one, taken by
 * `genericPlanReads` (test/support/plans.ts), which test/ledger/prepared.test.ts
 * also uses for the young, service-written ledger.
 *
 * Not held here, because it does not hold: on a ledger analyzed while nearly
 * empty every statement's cheapest plan is a sequential scan (README, Known
 * limits; docs/performance.md, "Plans made on a near-empty ledger").
 */
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredStatements } from '../../src/db/statement.js';
import '../../src/ledger/sql/rendered.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onCitus } from '../support/engine.js';
import { genericPlanReads, type SessionQuery } from '../support/plans.js';

/** The sweeper's set-based batches walk their partial indexes by design. */
const BATCHES = new Set(['lapse_batch', 'purge_batch']);
const INDEX_OF: Record<string, string> = { read_by_id: 'idem_operations_id_idx' };
/** Reads one operation's events by its id, and the operations not at all. */
const EVENTS_ONLY = new Set(['list_events']);
const PKEY = 'idem_operations_pkey';

/** The floor's old complete: a guarded update with the status beside the key. */
const CONTROL = `UPDATE idem_operations SET version = version + 1
  WHERE scope = $1 AND key = $2 AND lease_id = $3 AND status = 'in_progress'`;

/** One session: PREPARE, SET and EXPLAIN EXECUTE must share it. */
interface Session {
  query: SessionQuery;
  close(): Promise<void>;
}

async function openSession(t: TestDatabase): Promise<Session> {
  if (t.url) {
    const c = new pg.Client({ connectionString: t.url, connectionTimeoutMillis: 10_000 });
    await c.connect();
    return { query: async (text) => (await c.query(text)).rows, close: () => c.end() };
  }
  // The embedded engine is one session.
  return { query: (text) => t.db.rows<Record<string, unknown>>(sql.raw(text)), close: async () => {} };
}

let t: TestDatabase;
let s: Session;

beforeAll(async () => {
  if (onCitus()) return;
  t = await createTestDatabase();
  s = await openSession(t);
  await s.query(
    `INSERT INTO idem_operations (scope, key, id, fingerprint, effect, status, attempt, version, lease_id,
       lease_expires_at, dispatched_at, request, result, metadata, retention_ms, created_at, updated_at,
       completed_at, retained_until)
     SELECT 'plans', 'k' || i, gen_random_uuid(), 'fp', 'non_idempotent_write', 'succeeded', 1, 2,
       gen_random_uuid(), now(), now(), '{}', '{}', '{}', 86400000, now(), now(), now(), now() + interval '1 day'
     FROM generate_series(1, 30000) AS i`,
  );
});

afterAll(async () => {
  await s?.close();
  await t?.drop();
});

async function checkAll(state: string): Promise<void> {
  const statements = [...declaredStatements().entries()].filter(([name]) => !BATCHES.has(name));
  expect(statements.length).toBeGreaterThan(10);
  for (const [name, st] of statements) {
    const reads = await genericPlanReads(s.query, st.text, st.params.length);
    if (EVENTS_ONLY.has(name)) {
      expect(reads, `${name} (${state})`).toEqual([]);
      continue;
    }
    const index = INDEX_OF[name] ?? PKEY;
    expect(reads.length, `${name} (${state}) reads idem_operations`).toBeGreaterThan(0);
    expect(reads, `${name} (${state})`).toEqual(reads.map(() => index));
  }
}

describe.skipIf(onCitus())(
  'each statement finds its one operation by its key, on statistics that mislead a status guard',
  () => {
    const controls: string[][] = [];

    it('on a ledger never analyzed', async () => {
      controls.push(await genericPlanReads(s.query, CONTROL, 3));
      await checkAll('never analyzed');
    });

    it('on a ledger analyzed with every operation completed', async () => {
      await s.query('ANALYZE idem_operations');
      await s.query('ANALYZE idem_events');
      controls.push(await genericPlanReads(s.query, CONTROL, 3));
      await checkAll('analyzed, all completed');
    });

    it('the states are adverse: the plain status guard takes a partial index', () => {
      expect(controls).toHaveLength(2);
      expect(controls.flat().some((r) => r !== PKEY)).toBe(true);
    });
  },
);
