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
 * A third state, a ledger analyzed while nearly empty (on which every
 * statement's cheapest plan is a sequential scan), is the sweeper's to mend:
 * test/ledger/young-tables.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onCitus } from '../support/engine.js';
import {
  expectKeyReads,
  genericPlanReads,
  insertCompleted,
  keyStatements,
  openSession,
  PKEY,
  type Session,
} from '../support/plans.js';

/** The floor's old complete: a guarded update with the status beside the key. */
const CONTROL = `UPDATE idem_operations SET version = version + 1
  WHERE scope = $1 AND key = $2 AND lease_id = $3 AND status = 'in_progress'`;

let t: TestDatabase;
let s: Session;

beforeAll(async () => {
  if (onCitus()) return;
  t = await createTestDatabase();
  s = await openSession(t);
  await s.query(insertCompleted('plans', 1, 30000));
});

afterAll(async () => {
  await s?.close();
  await t?.drop();
});

async function checkAll(state: string): Promise<void> {
  const statements = keyStatements();
  expect(statements.length).toBeGreaterThan(10);
  for (const { name, st, index } of statements)
    expectKeyReads(await genericPlanReads(s.query, st.text, st.params.length), name, index, state);
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
