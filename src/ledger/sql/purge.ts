/**
 * Retention: deletes terminal and `ready` operations past `retained_until`,
 * with their events, in one statement per batch (indexed, at most 1,000 rows,
 * no `DELETE ... LIMIT`). `in_progress`, `pending_approval` and
 * `outcome_unknown` are never purged. The guard is repeated on the outer
 * DELETE so a row re-acquired after the batch was chosen is left alone.
 */
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';

const PURGEABLE = `status IN ('succeeded', 'failed', 'rejected', 'ready') AND retained_until <= now()`;

const PURGE_BATCH = statement(
  'purge_batch',
  `
  WITH gone AS (
    DELETE FROM idem_operations
    WHERE (scope, key) IN (
        SELECT scope, key FROM idem_operations WHERE ${PURGEABLE}
        ORDER BY retained_until LIMIT $limit::int)
      AND ${PURGEABLE}
    RETURNING scope, id
  ), gone_events AS (
    DELETE FROM idem_events e USING gone WHERE e.scope = gone.scope AND e.operation_id = gone.id
  )
  SELECT count(*)::int AS n FROM gone`,
);

export async function purgeBatch(db: Database, limit: number): Promise<number> {
  const rows = await db.run<{ n: number }>(PURGE_BATCH, { limit: Math.min(limit, 1000) });
  return rows[0]?.n ?? 0;
}
