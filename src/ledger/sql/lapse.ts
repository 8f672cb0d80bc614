/**
 * The sweeper's lapse batch: writes lapses that reads already apply (see
 * `row.ts`), oldest first, found through the partial indexes on
 * `lease_expires_at` and `approval_deadline`. The due rows and their lapsed
 * values are computed once, in a SELECT (MATERIALIZED: as a plain
 * `IN (subquery)` the planner, on statistics that predate a burst of expiries,
 * re-ran the LIMIT subquery per row); the UPDATE copies them, guarded by the
 * version it read, so a row that changed meanwhile (a begin, another sweeper)
 * is left alone and two sweepers never record the same lapse twice.
 * (begin writes the lapse of the one row it answers about: `begin.ts`.)
 */
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';
import {
  insertEvent,
  LAPSE_EVENT_DETAIL,
  LAPSE_EVENT_TYPE,
  lapseEventId,
  STAMP,
  STAMP_CTE,
} from './events.js';
import { effectiveOf, epochMicros, lapsedColumns } from './row.js';

const LAPSED_COLUMNS = lapsedColumns('o', 'e.eff');
const LAPSED = Object.keys(LAPSED_COLUMNS);

/** Due rows of one kind; `leaseAt` is the lease's expiry in the lease arm, NULL in the approval arm. */
const dueOf = (where: string, order: string, leaseAt: string) => `(
      SELECT o.scope, o.key, o.version, e.eff, ${leaseAt} AS lease_at,
        ${Object.entries(LAPSED_COLUMNS)
          .map(([k, v]) => `${v} AS ${k}`)
          .join(',\n        ')}
      FROM idem_operations o CROSS JOIN clock c ${effectiveOf('o')}
      WHERE ${where} AND e.eff <> o.status
      ORDER BY ${order} LIMIT $limit::int)`;

/**
 * The clock as a scalar subquery where a due scan compares it, so that it is
 * the index condition and the scan stops at the first row not yet due. As
 * `<= c.now` over the joined clock it was a join filter: with nothing due the
 * scan read every live lease's row, once a pass (200,000 live leases: 45 ms
 * a pass; on the benchmark's 10-million-row ledger it took Postgres from 0.99
 * to 1.53 ms per begin + complete). Still one `now()` per statement: the CTE
 * is evaluated once.
 */
const NOW = '(SELECT now FROM clock)';

/**
 * Where the due-lease scan starts: `$afterUs` (microseconds since the epoch),
 * or from the oldest lease when it is null. An expired lease that was
 * dispatched for a read or an idempotent write does not lapse (the next begin
 * recovers it), so it stays in the due index, and a scan from the oldest lease
 * read every such row on every pass: 100,000 of them cost a pass 85 ms, every
 * second, for as long as nobody begins them again. The sweeper keeps the floor
 * (`LeaseScanFloor` in `sweeper.ts`) from what the batch returns. COALESCE
 * keeps it a bound on the index, also in a generic plan.
 */
const LEASE_FLOOR = `COALESCE(timestamptz 'epoch' + $afterUs::bigint * interval '1 microsecond', '-infinity')`;

/**
 * The batch's commit does not wait for its WAL to reach the disk
 * (`synchronous_commit = off` for this transaction only). A lapse is derived:
 * reads apply it whether or not it is written, and a lapse lost in a crash is
 * written again by the next pass, as the same event (its id comes from the
 * operation's id and version). Any later change to the same row commits
 * synchronously, and its flush carries the lapse's WAL, which comes before it.
 * Measured (S5, 100,000 expired leases under S1, alternating rounds of 3 runs on
 * one host): drained in 6.95 s (median of 6) against 8.6 s waiting for the disk;
 * the CPU per lapse is the same, and S1's rate and p99 during the drain moved
 * within the host's noise.
 */
const RELAXED_COMMIT = `set_config('synchronous_commit', 'off', true)`;

/**
 * What the batch's event and count read of each lapsed row, and nothing else:
 * `RETURNING o.*` carried every row whole (its request and metadata among
 * them) through the CTE. Measured alone (100,000 lapses in batches of 500,
 * alternating, 3 to 4 rounds): 1 to 2% less time per lapse with the
 * benchmark's 70-byte request, 4 to 7% with a 1.5 kB one.
 */
const LAPSED_RETURNS = 'o.scope, o.id, o.key, o.version, o.status, o.attempt, o.updated_at';

const LAPSE_BATCH = statement(
  'lapse_batch',
  `
  WITH clock AS (SELECT now() AS now, ${RELAXED_COMMIT} AS commit_mode), due AS MATERIALIZED (
    ${dueOf(
      `o.status = 'in_progress' AND o.lease_expires_at >= ${LEASE_FLOOR} AND o.lease_expires_at <= ${NOW}`,
      'o.lease_expires_at',
      'o.lease_expires_at',
    )}
    UNION ALL
    ${dueOf(
      `o.status = 'pending_approval' AND o.approval_deadline <= ${NOW}`,
      'o.approval_deadline',
      'NULL::timestamptz',
    )}
  ), ${STAMP_CTE}, lapsed AS (
    UPDATE idem_operations o SET status = due.eff, ${LAPSED.map((k) => `${k} = due.${k}`).join(', ')},
      version = o.version + 1
    FROM due
    WHERE o.scope = due.scope AND o.key = due.key AND o.version = due.version
    RETURNING ${LAPSED_RETURNS}
  ), ev AS (
    ${insertEvent({
      from: 'lapsed l',
      row: 'l',
      id: lapseEventId('l', 'l.version - 1'),
      version: 'l.version - 1',
      type: LAPSE_EVENT_TYPE('l.status'),
      at: STAMP,
      actor: '$actor::text',
      detail: LAPSE_EVENT_DETAIL('l.status', 'l.updated_at'),
    })}
  )
  SELECT count(*)::int AS n, (count(*) FILTER (WHERE status = 'rejected'))::int AS "approvalExpired",
    (SELECT count(lease_at) FROM due)::int AS "leasesDue",
    (SELECT ${epochMicros('max(lease_at)')} FROM due) AS "lastDueUs",
    ${epochMicros(NOW)} AS "nowUs"
  FROM lapsed`,
);

export interface LapseCount {
  /** Lapses written. */
  n: number;
  /** Of which expired approvals (the rest are leases). */
  approvalExpired: number;
  /**
   * Leases the scan found due, written or not (a row changed meanwhile is left
   * alone): when fewer than the limit, the scan reached the clock.
   */
  leasesDue: number;
  /** The expiry of the last lease found due, in microseconds since the epoch (null when none was). */
  lastDueUs: string | null;
  /** The statement's clock, in microseconds since the epoch. */
  nowUs: string;
}

/**
 * Writes up to `limit` lease lapses and `limit` approval lapses, oldest first;
 * leases only from `afterUs` on (null: from the oldest).
 */
export async function lapseBatch(
  db: Database,
  limit: number,
  actor: string,
  afterUs: string | null = null,
): Promise<LapseCount> {
  // An aggregate without GROUP BY answers one row, always.
  const [row] = await db.run<LapseCount>(LAPSE_BATCH, { limit, actor, afterUs });
  if (!row) throw new Error('the lapse batch returned no row');
  return row;
}
