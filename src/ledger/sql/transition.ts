/**
 * The shape of every lease-holder and operator transition: ONE statement that
 * locks the row, applies a guarded UPDATE, writes its event, and, when the
 * guard fails, answers with the row as it now is (and may record the refusal),
 * so the caller can say why without a second read.
 *
 *   cur  = the row, locked (FOR UPDATE sees the newest committed version),
 *          with its effective status (rule A) and whether its lease is live
 *   upd  = UPDATE ... FROM cur WHERE <guard over cur> RETURNING the new row
 *   ev   = the event of upd, or the refusal event when upd is empty
 *   lapse_ev = when upd changed a row whose lapse (rule A, approval deadline)
 *          was only read so far, the lapse's own event first (actor
 *          `system`, under the old version), so the log tells every
 *          transition whether or not the sweeper saw it
 *
 * Guards and SET lists refer to the old row as `cur.<column>`.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { IdemError } from '../../errors.js';
import { insertEventsFrom, LAPSE_EVENT_DETAIL, LAPSE_EVENT_TYPE, STAMP, STAMP_CTE } from './events.js';
import { LAPSED, type OperationRow, VIEW } from './view.js';

export interface TransitionSpec {
  scope: string;
  key: string;
  actor: string;
  guard: SQL;
  set: SQL;
  /** The event of a successful transition, SQL over the new row and `prev_status`; none if absent. */
  event?: { type: SQL; detail: SQL };
  /** A refusal worth recording for operators: written only when the guard failed. */
  refusal?: { when: SQL; type: SQL; detail: SQL };
  /** An extra boolean over `cur`, returned as `probe` (e.g. "same result"). */
  probe?: SQL;
}

export interface TransitionResult {
  changed: boolean;
  row: OperationRow;
  /** The effective status before the statement. */
  prevStatus: OperationRow['status'];
  probe: boolean | null;
}

export type TransitionRow = OperationRow & {
  changed: boolean;
  prevStatus: OperationRow['status'];
  probe: boolean | null;
};

/** The statement itself (exported for the benchmark's pgbench scripts). */
export function transitionStatement(t: TransitionSpec): SQL {
  const probe = t.probe ?? sql`NULL::boolean`;
  const refusal = t.refusal
    ? sql`, refused AS (
        ${insertEventsFrom(sql`cur`, t.refusal.type, t.actor, t.refusal.detail, sql`NOT EXISTS (SELECT 1 FROM upd) AND (${t.refusal.when})`, STAMP)}
      )`
    : sql``;
  const event = t.event
    ? sql`, ev AS (${insertEventsFrom(sql`upd`, t.event.type, t.actor, t.event.detail, sql`true`, STAMP)})`
    : sql``;
  return sql`
    WITH cur AS (
      SELECT *, ${sql.raw(LAPSED.status)} AS eff_status, (lease_expires_at > now()) AS lease_live
      FROM idem_operations WHERE scope = ${t.scope} AND key = ${t.key}
      FOR UPDATE
    ), ${STAMP_CTE}, upd AS (
      UPDATE idem_operations o SET ${t.set}
      FROM cur
      WHERE o.scope = cur.scope AND o.key = cur.key AND (${t.guard})
      RETURNING o.*, cur.eff_status AS prev_status
    ), lapse_ev AS (
      ${insertEventsFrom(
        sql`cur`,
        LAPSE_EVENT_TYPE(sql`eff_status`),
        'system',
        LAPSE_EVENT_DETAIL(sql`eff_status`, sql.raw(LAPSED.updatedAt)),
        sql`eff_status <> status AND EXISTS (SELECT 1 FROM upd)`,
        STAMP,
      )}
    )${event}${refusal}
    SELECT true AS changed, prev_status AS "prevStatus", NULL::boolean AS probe, ${VIEW} FROM upd
    UNION ALL
    SELECT false, eff_status, (${probe}), ${VIEW} FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`;
}

/** Runs a transition; no row at all is NOT_FOUND. */
export async function transition(db: Database, t: TransitionSpec): Promise<TransitionResult> {
  const rows = await db.rows<TransitionRow>(transitionStatement(t));
  const r = rows[0];
  if (!r) throw new IdemError('NOT_FOUND', 'no such operation');
  const { changed, prevStatus, probe: p, ...row } = r;
  return { changed, row, prevStatus, probe: p };
}
