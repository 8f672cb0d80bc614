/**
 * Writes a lapse that reads already apply (see `view.ts`): rule A on an
 * expired lease, or a passed approval deadline. Used by begin for the one
 * operation it is looking at, and by the sweeper in batches. The guard is the
 * lapse condition itself, re-checked on the newest row version, so two
 * writers (replicas, sweepers) never record the same lapse twice.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { insertEventsFrom, LAPSE_EVENT_DETAIL, LAPSE_EVENT_TYPE } from './events.js';
import { ANY_LAPSE, LAPSED, type OperationRow, VIEW } from './view.js';

const SET_LAPSED = sql.raw(`
  status = ${LAPSED.status},
  updated_at = ${LAPSED.updatedAt},
  completed_at = ${LAPSED.completedAt},
  retained_until = ${LAPSED.retainedUntil},
  result = ${LAPSED.result},
  approval_state = ${LAPSED.approvalState},
  approval_decided_at = ${LAPSED.approvalDecidedAt},
  version = version + 1`);

/** `due`, if given, is a CTE list ending in `due(scope, key)`: the rows to look at. */
function lapseStatement(where: SQL, actor: string, due?: SQL): SQL {
  return sql`
    WITH ${due ? sql`${due}, ` : sql``}lapsed AS (
      UPDATE idem_operations SET ${SET_LAPSED}
      ${due ? sql`FROM due` : sql``}
      WHERE ${where} AND ${sql.raw(ANY_LAPSE)}
      RETURNING idem_operations.*
    ), ev AS (
      ${insertEventsFrom(
        sql`lapsed`,
        LAPSE_EVENT_TYPE(sql`status`),
        actor,
        LAPSE_EVENT_DETAIL(sql`status`, sql`updated_at`),
      )}
    )
    SELECT ${VIEW} FROM lapsed`;
}

/** Writes the lapse of one operation, if it has lapsed. */
export async function lapseOne(
  db: Database,
  scope: string,
  key: string,
  actor: string,
): Promise<OperationRow | undefined> {
  const rows = await db.rows<OperationRow>(lapseStatement(sql`scope = ${scope} AND key = ${key}`, actor));
  return rows[0];
}

/**
 * Writes up to `limit` lapses of each kind, oldest first, found through the
 * partial indexes on `lease_expires_at` and `approval_deadline`. The due rows
 * are chosen once (MATERIALIZED): as a plain `IN (subquery)` the planner, on
 * statistics that predate a burst of expiries, re-ran the LIMIT subquery per
 * row (one 500-row batch took minutes on a million-row ledger).
 */
export async function lapseBatch(db: Database, limit: number, actor: string): Promise<OperationRow[]> {
  return db.rows<OperationRow>(
    lapseStatement(
      sql`idem_operations.scope = due.scope AND idem_operations.key = due.key`,
      actor,
      sql`due AS MATERIALIZED (
        (SELECT scope, key FROM idem_operations
          WHERE status = 'in_progress' AND lease_expires_at <= now()
            AND (dispatched_at IS NULL OR effect IN ('non_idempotent_write', 'unclassified'))
          ORDER BY lease_expires_at LIMIT ${limit})
        UNION ALL
        (SELECT scope, key FROM idem_operations
          WHERE status = 'pending_approval' AND approval_deadline <= now()
          ORDER BY approval_deadline LIMIT ${limit}))`,
    ),
  );
}
