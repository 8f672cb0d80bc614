/**
 * The audit log. Every event row is written by the same statement as the
 * state change it records (a data-modifying CTE), never by a trigger.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { OperationEvent } from '../../contract/index.js';
import type { Database } from '../../db/database.js';

/**
 * `INSERT INTO idem_events ... SELECT ... FROM <source>`: one event per row of
 * `source`, a CTE shaped like `idem_operations`. `type` and `detail` are SQL
 * over that row's columns.
 */
export function insertEventsFrom(
  source: SQL,
  type: SQL,
  actor: string,
  detail: SQL,
  where: SQL = sql`true`,
  at: SQL = sql`clock_timestamp()`,
): SQL {
  return sql`INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
    SELECT scope, gen_random_uuid(), id, key, version, ${type}, ${at}, ${actor}, attempt, ${detail}
    FROM ${source} WHERE ${where}`;
}

/**
 * One timestamp for all the events of one statement (define the CTE
 * `stamp AS (SELECT clock_timestamp() AS at)` and pass `STAMP` as `at`): read
 * when the first event is written, so after the row lock, and equal for a
 * lapse and the change that follows it, so the log reads oldest first.
 */
export const STAMP_CTE = sql`stamp AS (SELECT clock_timestamp() AS at)`;
export const STAMP = sql`(SELECT at FROM stamp)`;

/**
 * The event of a lapse. Like every event it is stamped when it is recorded, so
 * the log stays append-only and oldest first; when the lapse happened (lease
 * expiry, approval deadline) is in its detail as `lapsedAt`.
 */
export const LAPSE_EVENT_TYPE = (status: SQL) =>
  sql`CASE ${status} WHEN 'rejected' THEN 'approval_expired' ELSE 'lease_expired' END`;
export const LAPSE_EVENT_DETAIL = (status: SQL, lapsedAt: SQL) =>
  sql`jsonb_build_object('status', ${status},
    'lapsedAt', to_char(${lapsedAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;

interface EventRow {
  type: OperationEvent['type'];
  at: number;
  actor: string;
  attempt: number;
  detail: Record<string, unknown>;
}

/**
 * Oldest first. `version` orders one operation's changes; within a version,
 * `at` (clock_timestamp(), taken after the row lock) puts a refusal after the
 * change it was refused by.
 */
export async function listEvents(
  db: Database,
  scope: string,
  operationId: string,
): Promise<OperationEvent[]> {
  const rows = await db.rows<EventRow>(sql`
    SELECT type, (extract(epoch FROM at) * 1000)::float8 AS at, actor, attempt, detail FROM idem_events
    WHERE scope = ${scope} AND operation_id = ${operationId}
    ORDER BY version, at`);
  return rows.map((r) => ({
    type: r.type,
    at: new Date(r.at).toISOString(),
    actor: r.actor,
    attempt: r.attempt,
    detail: r.detail ?? {},
  }));
}
