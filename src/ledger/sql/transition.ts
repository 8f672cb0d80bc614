/**
 * The shape of every transition of an existing operation (take-over by begin,
 * lease-holder and operator calls, a lapse written by begin): ONE statement
 * that locks the row, applies a guarded UPDATE, writes its event, and, when
 * the guard fails, answers with the row as it now is (and may record the
 * refusal), so the caller can say why without a second read.
 *
 *   cur      = the row, locked (FOR UPDATE waits for a concurrent writer and
 *              sees the newest committed version), with the database's time
 *              `now`, its effective status `eff_status` (row.ts), whether its
 *              lease is live, and every time value the UPDATE will copy, all
 *              in cur's target list (re-evaluated on the newest version)
 *   upd      = UPDATE ... FROM cur WHERE <guard over cur> RETURNING the new row
 *   lapse_ev = when upd changed a row whose lapse was only read so far, the
 *              lapse's own event first (actor `system`, at the old version),
 *              so the log tells every transition whether or not the sweeper
 *              saw it
 *   ev       = the event of upd; refused = the refusal event when upd is empty
 *   stamp    = when the events were recorded (see `events.ts`)
 *   res      = the new row, or cur's row when nothing changed, projected once
 *
 * Guards and SET lists refer to the old row as `cur.<column>`; parameters are
 * `$name` (see `db/statement.ts`): every shape has `$scope`, `$key`, and
 * `$actor` and `$eventId` when it writes an event.
 */
import type { Database } from '../../db/database.js';
import { type Statement, statement } from '../../db/statement.js';
import { IdemError } from '../../errors.js';
import {
  insertEvent,
  LAPSE_EVENT_DETAIL,
  LAPSE_EVENT_TYPE,
  lapseEventId,
  STAMP,
  STAMP_CTE,
} from './events.js';
import { CLOCK, columnsOf, effectiveOf, effStatus, fromDb, type OperationRow, projection } from './row.js';

export interface TransitionShape {
  /** The statement's name (`idem_<name>`, `docs/sql/<name>.sql`). */
  name: string;
  /**
   * Extra `cur` columns, over `o` (the row) and `c.now`: all time arithmetic goes here.
   * They must be expressions of cur's own target list, never a joined subquery:
   * when FOR UPDATE waits for a concurrent writer, Postgres re-evaluates the
   * target list on the newest row version but reuses joined subqueries' rows.
   */
  prepare?: string;
  guard: string;
  /** SET list over `cur`; `version` and `updated_at` are always set. */
  set: string;
  /** `updated_at` of the new row: the database's time unless the shape says when it happened. */
  updatedAt?: string;
  /** The event of a successful transition, over `u` (the new row) and `cur`. */
  event?: { type: string; detail: string };
  /** A refusal worth recording for operators: written only when the guard failed. */
  refusal?: { when: string; type: string; detail: string };
  /** Whether a refused call asked for what is already so (the same result, a live dispatched lease), over `cur`. */
  alreadyDone?: string;
}

export interface TransitionResult {
  changed: boolean;
  row: OperationRow;
  /** The effective status before the statement. */
  prevStatus: OperationRow['status'];
  alreadyDone: boolean | null;
}

type TransitionRow = OperationRow & {
  changed: boolean;
  prevStatus: OperationRow['status'];
  alreadyDone: boolean | null;
};

/** Builds the statement of one shape (at module load: one text per shape). */
export function transitionStatement(t: TransitionShape): Statement {
  const prepare = t.prepare ? `,\n      ${t.prepare}` : '';
  const event = t.event
    ? `, ev AS (
      ${insertEvent({ from: 'upd u, cur', row: 'u', id: '$eventId::uuid', type: t.event.type, at: STAMP, actor: '$actor::text', detail: t.event.detail })}
    )`
    : '';
  const refusal = t.refusal
    ? `, refused AS (
      ${insertEvent({ from: 'cur', row: 'cur', id: '$eventId::uuid', type: t.refusal.type, at: STAMP, actor: '$actor::text', detail: t.refusal.detail, where: `NOT EXISTS (SELECT 1 FROM upd) AND (${t.refusal.when})` })}
    )`
    : '';
  return statement(
    t.name,
    `
    WITH cur AS (
      SELECT o.*, c.now, ${effStatus('o', 'c.now')} AS eff_status,
        (o.lease_expires_at > c.now) AS lease_live,
        c.now + o.retention_ms * interval '1 millisecond' AS retain_until${prepare}
      FROM idem_operations o CROSS JOIN ${CLOCK}
      WHERE o.scope = $scope AND o.key = $key
      FOR UPDATE OF o
    ), ${STAMP_CTE}, upd AS (
      UPDATE idem_operations o SET ${t.set}, version = cur.version + 1, updated_at = ${t.updatedAt ?? 'cur.now'}
      FROM cur
      -- The key again, not only the join to cur: Citus prunes to one shard by the WHERE alone.
      WHERE o.scope = $scope AND o.key = $key AND o.scope = cur.scope AND o.key = cur.key AND (${t.guard})
      RETURNING o.*
    ), lapse_ev AS (
      ${insertEvent({
        from: 'cur',
        row: 'cur',
        id: lapseEventId('cur'),
        type: LAPSE_EVENT_TYPE('cur.eff_status'),
        at: STAMP,
        actor: `'system'`,
        detail: LAPSE_EVENT_DETAIL('cur.eff_status', lapsedAt('cur')),
        where: 'cur.eff_status <> cur.status AND EXISTS (SELECT 1 FROM upd)',
      })}
    )${event}${refusal}, res AS (
      SELECT true AS changed, ${columnsOf('u')} FROM upd u
      UNION ALL
      SELECT false, ${columnsOf('cur')} FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)
    )
    SELECT r.changed, cur.eff_status AS "prevStatus", (${t.alreadyDone ?? 'NULL::boolean'}) AS "alreadyDone",
      ${projection('r')}
    FROM res r CROSS JOIN cur CROSS JOIN LATERAL (SELECT cur.now AS now) c ${effectiveOf('r')}`,
  );
}

/** When the lapse of `cur` happened: its lease expiry, or its approval deadline. */
const lapsedAt = (r: string) =>
  `CASE WHEN ${r}.eff_status = 'rejected' THEN ${r}.approval_deadline ELSE ${r}.lease_expires_at END`;

/** Runs a transition; no row at all is NOT_FOUND. */
export async function transition(
  db: Database,
  st: Statement,
  values: Readonly<Record<string, unknown>>,
): Promise<TransitionResult> {
  const rows = await db.run<Record<string, unknown>>(st, values);
  if (!rows[0]) throw new IdemError('NOT_FOUND', 'no such operation');
  // The row keeps the three flags as extra fields: copying 30 columns out of
  // it (a rest pattern) cost about 1 µs a call, for nothing anyone reads.
  const row = fromDb<TransitionRow>(rows[0]);
  return { changed: row.changed, row, prevStatus: row.prevStatus, alreadyDone: row.alreadyDone };
}
