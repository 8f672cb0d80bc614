/**
 * The audit log. Every event row is written by the same statement as the
 * state change it records (a data-modifying CTE), never by a trigger. Event
 * ids are made by the service (`$eventId`), or, for a lapse, derived from the
 * operation and the version it lapsed at (one lapse per version), so no
 * VOLATILE function runs inside an UPDATE or RETURNING (the stamp below is
 * read by the INSERT of the event alone).
 */
import type { EventType, OperationEvent } from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';

interface EventInsert {
  /** FROM list; `row` names the relation shaped like `idem_operations`. */
  from: string;
  row: string;
  id: string;
  type: string;
  at: string;
  actor: string;
  detail: string;
  where?: string;
  /** The version recorded; the row's own unless given. */
  version?: string;
}

/** `INSERT INTO idem_events ... SELECT ... FROM <from>`: one event per row of `row`. */
export function insertEvent(e: EventInsert): string {
  const r = e.row;
  return `INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
      SELECT ${r}.scope, ${e.id}, ${r}.id, ${r}.key, ${e.version ?? `${r}.version`}, ${e.type}, ${e.at}, ${e.actor}, ${r}.attempt,
        ${e.detail}
      FROM ${e.from}${e.where ? ` WHERE ${e.where}` : ''}`;
}

/**
 * The id of the lapse event of row `r` at `version` (its own by default): a
 * lapse happens once per version, so every writer of it makes the same id.
 * The first 12 hex digits are the operation id's (for a UUIDv7 id, when it
 * was made), the rest is a hash: the lapses of operations made together,
 * which expire together, then land on the same index pages.
 */
export const lapseEventId = (r: string, version = `${r}.version`) =>
  `(left(replace(${r}.id::text, '-', ''), 12) || substr(md5(${r}.id::text || '/lapse/' || ${version}), 13))::uuid`;

/**
 * The event of a lapse. Like every event it is stamped when it is recorded, so
 * the log stays append-only; when the lapse happened (lease expiry, approval
 * deadline) is in its detail as `lapsedAt`.
 */
const APPROVAL_EXPIRED: EventType = 'approval_expired';
const LEASE_EXPIRED: EventType = 'lease_expired';
export const LAPSE_EVENT_TYPE = (status: string) =>
  `CASE ${status} WHEN 'rejected' THEN '${APPROVAL_EXPIRED}' ELSE '${LEASE_EXPIRED}' END`;
export const LAPSE_EVENT_DETAIL = (status: string, lapsedAt: string) =>
  `jsonb_build_object('status', ${status},
          'lapsedAt', to_char(${lapsedAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;

/**
 * When the events of one statement were recorded: one value, read when the
 * first event is written, so after the row lock (define the CTE `STAMP_CTE`,
 * pass `STAMP` as `at`). This is an audit stamp, not a decision: decisions use
 * the statement's `now()`, taken once. A refused call that waited on the row
 * lock is therefore stamped after the change it lost to, and the log reads
 * oldest first in both order and time.
 */
export const STAMP_CTE = 'stamp AS (SELECT clock_timestamp() AS at)';
export const STAMP = '(SELECT at FROM stamp)';

/**
 * An operation's log, oldest first. `version` orders its changes; within a
 * version, what happened is always in this order: the change that made it
 * (one event), the calls refused while it was current, then its lapse (one
 * event, recorded by whatever wrote the next version). The stamps say the
 * first two (a refusal is stamped after its version's last event,
 * `refusalStamp`); the lapse is put last by its kind, since its stamp, which
 * is the next change's, can equal a refusal's where the clock counts only
 * milliseconds (the embedded engine's).
 */
export const EVENT_ORDER = `version, type IN ('${APPROVAL_EXPIRED}', '${LEASE_EXPIRED}'), at`;

/**
 * The stamp of a refusal of row `r` (shaped like `idem_operations`, at the
 * version it was refused at): the statement's stamp, or just after the last
 * event of that version when that is later (the same millisecond, on the
 * embedded engine), so refusals list in the order they were made. Refusals
 * are rare (a stale lease, a lost operator race): the extra read is theirs.
 */
export const refusalStamp = (r: string, scope: string) =>
  `GREATEST(${STAMP}, (SELECT max(e.at) + interval '1 microsecond' FROM idem_events e
        WHERE e.scope = ${scope} AND e.operation_id = ${r}.id AND e.version = ${r}.version))`;

const LIST_EVENTS = statement(
  'list_events',
  `
  SELECT type, at, actor, attempt, detail FROM idem_events
  WHERE scope = $scope AND operation_id = $operationId::uuid
  ORDER BY ${EVENT_ORDER}`,
);

interface EventRow {
  type: OperationEvent['type'];
  /** A Date from the embedded engine, epoch milliseconds from node-postgres (`statement-query.ts`). */
  at: Date | number;
  actor: string;
  attempt: number;
  detail: Record<string, unknown>;
}

export async function listEvents(
  db: Database,
  scope: string,
  operationId: string,
): Promise<OperationEvent[]> {
  const rows = await db.run<EventRow>(LIST_EVENTS, { scope, operationId });
  return rows.map((r) => ({
    type: r.type,
    at: new Date(r.at).toISOString(),
    actor: r.actor,
    attempt: r.attempt,
    detail: r.detail ?? {},
  }));
}
