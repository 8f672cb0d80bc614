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
 *              (stamped after its version's last event: `refusalStamp`)
 *   stamp    = when the events were recorded (see `events.ts`)
 *   res      = the new row, or cur's row when nothing changed, projected once
 *
 * Guards and SET lists refer to the old row as `cur.<column>`; parameters are
 * `$name` (see `db/statement.ts`): every shape has `$scope`, `$key`, and
 * `$actor` and `$eventId` when it writes an event.
 */
import {
  arrayValues,
  byIdentity,
  coalescerFor,
  type Fold,
  identityOf,
  unnestInput,
} from '../../db/coalesce.js';
import type { Database } from '../../db/database.js';
import { type Statement, statement } from '../../db/statement.js';
import { IdemError } from '../../errors.js';
import {
  insertEvent,
  LAPSE_EVENT_DETAIL,
  LAPSE_EVENT_TYPE,
  lapseEventId,
  refusalStamp,
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
  /**
   * Extra `cur` columns over `x` (the locked row with `now`, `eff_status` and
   * `prepare`'s columns), computed around the locked select rather than in
   * it: a column that depends on the effective status reads `x.eff_status`,
   * so rule A is still evaluated once per row (the locked select's output is
   * already the newest version, so nothing here needs re-evaluating).
   */
  derive?: string;
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

/**
 * The text of a shape: for one row (`$scope`, `$key`), or for many (`many`:
 * the input relation `i` from `unnest` of one array per parameter, its
 * columns `p_<name>`, carried in `cur` so every later part reads them there).
 * The many-row text is the one-row text with every "the row" made "the
 * row of this input": each join and each EXISTS on `upd` matches by key.
 */
function transitionText(
  t: TransitionShape,
  many?: { names: readonly string[]; types: Readonly<Record<string, string>> },
): string {
  // A parameter: `$x` for one row; in many, the input's `p_x`, read from `i` inside cur, else from cur.
  const p = (text: string | undefined, from = 'cur') =>
    many && text ? text.replace(/\$([A-Za-z][A-Za-z0-9]*)/g, `${from}."p_$1"`) : text;
  const sameRow = (a: string, b: string) => `${a}.scope = ${b}.scope AND ${a}.key = ${b}.key`;
  const hasUpd = many
    ? `EXISTS (SELECT 1 FROM upd u WHERE ${sameRow('u', 'cur')})`
    : 'EXISTS (SELECT 1 FROM upd)';
  const prepare = t.prepare ? `,\n      ${p(t.prepare, 'i')}` : '';
  const event = t.event
    ? `, ev AS (
      ${insertEvent({ from: many ? `upd u JOIN cur ON ${sameRow('cur', 'u')}` : 'upd u, cur', row: 'u', id: p('$eventId::uuid')!, type: p(t.event.type)!, at: STAMP, actor: p('$actor::text')!, detail: p(t.event.detail)! })}
    )`
    : '';
  const refusal = t.refusal
    ? `, refused AS (
      ${insertEvent({ from: 'cur', row: 'cur', id: p('$eventId::uuid')!, type: p(t.refusal.type)!, at: refusalStamp('cur', p('$scope')!), actor: p('$actor::text')!, detail: p(t.refusal.detail)!, where: `NOT ${hasUpd} AND (${p(t.refusal.when)})` })}
    )`
    : '';
  const input = many
    ? `input AS (
      ${unnestInput(many.names, many.types, 'p_')}
    ), `
    : '';
  const locked = (where: string) => `SELECT o.*, c.now, ${effStatus('o', 'c.now')} AS eff_status,
        (o.lease_expires_at > c.now) AS lease_live,
        c.now + o.retention_ms * interval '1 millisecond' AS retain_until${prepare}
      FROM idem_operations o CROSS JOIN ${CLOCK}
      WHERE ${where}
      FOR UPDATE OF o`;
  // Many: one locked primary-key read per input, in key order, so two batches lock shared
  // keys alike. A subquery with FOR UPDATE is never flattened into a join: no plan scans the table.
  const lockedCur = many
    ? `SELECT l.*, i.* FROM (SELECT * FROM input ORDER BY "p_scope", "p_key") i
      CROSS JOIN LATERAL (${locked(`o.scope = i."p_scope" AND o.key = i."p_key"`)}) l`
    : locked('o.scope = $scope AND o.key = $key');
  const cur = t.derive ? `SELECT x.*, ${p(t.derive, 'x')} FROM (${lockedCur}) x` : lockedCur;
  return `
    WITH ${input}cur AS (
      ${cur}
    ), ${STAMP_CTE}, upd AS (
      UPDATE idem_operations o SET ${p(t.set)}, version = cur.version + 1, updated_at = ${p(t.updatedAt) ?? 'cur.now'}
      FROM cur
      ${
        many
          ? `WHERE ${sameRow('o', 'cur')} AND (${p(t.guard)})`
          : `-- The key again, not only the join to cur: Citus prunes to one shard by the WHERE alone.
      WHERE o.scope = $scope AND o.key = $key AND o.scope = cur.scope AND o.key = cur.key AND (${t.guard})`
      }
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
        where: `cur.eff_status <> cur.status AND ${hasUpd}`,
      })}
    )${event}${refusal}, res AS (
      SELECT true AS changed, ${columnsOf('u')} FROM upd u
      UNION ALL
      SELECT false, ${columnsOf('cur')} FROM cur WHERE NOT ${hasUpd}
    )
    SELECT r.changed, cur.eff_status AS "prevStatus", (${p(t.alreadyDone) ?? 'NULL::boolean'}) AS "alreadyDone",
      ${projection('r')}
    FROM res r ${many ? `JOIN cur ON ${sameRow('cur', 'r')}` : 'CROSS JOIN cur'} CROSS JOIN LATERAL (SELECT cur.now AS now) c ${effectiveOf('r')}`;
}

/** Builds the statement of one shape (at module load: one text per shape). */
export function transitionStatement(t: TransitionShape): Statement {
  return statement(t.name, transitionText(t));
}

/** A shape's statement and its many-row form (`<name>_many`), for a transition that coalesces. */
export interface FoldedTransition {
  one: Statement;
  many: Statement;
  names: readonly string[];
  /** How it folds on a database (`db/coalesce.ts`): the answer of each input, or none (NOT_FOUND). */
  fold(db: Database): Fold<TransitionValues, TransitionResult | undefined>;
}

/**
 * The shape for one row and for many. `types` gives each parameter's SQL type
 * (the many-row form binds one array per parameter); every parameter of the
 * one-row text must have one.
 */
export function foldedTransitionStatement(
  t: TransitionShape,
  types: Readonly<Record<string, string>>,
): FoldedTransition {
  const one = transitionStatement(t);
  const names = one.params;
  for (const n of names) if (!types[n]) throw new Error(`transition ${t.name}: no SQL type for $${n}`);
  const many = statement(
    `${t.name}_many`,
    transitionText({ ...t, name: `${t.name}_many` }, { names, types }),
  );
  const f: FoldedTransition = {
    one,
    many,
    names,
    fold: (db) => ({
      identity: identityOf,
      one: (v) => transitionOne(db, f, v),
      many: (vs) => transitionMany(db, f, vs),
      absent: undefined,
    }),
  };
  return f;
}

/** When the lapse of `cur` happened: its lease expiry, or its approval deadline. */
const lapsedAt = (r: string) =>
  `CASE WHEN ${r}.eff_status = 'rejected' THEN ${r}.approval_deadline ELSE ${r}.lease_expires_at END`;

function resultOf(raw: Record<string, unknown>): TransitionResult {
  // The row keeps the three flags as extra fields: copying 30 columns out of
  // it (a rest pattern) cost about 1 µs a call, for nothing anyone reads.
  const row = fromDb<TransitionRow>(raw);
  return { changed: row.changed, row, prevStatus: row.prevStatus, alreadyDone: row.alreadyDone };
}

const notFound = () => new IdemError('NOT_FOUND', 'no such operation');

/** Runs a transition; no row at all is NOT_FOUND. */
export async function transition(
  db: Database,
  st: Statement,
  values: Readonly<Record<string, unknown>>,
): Promise<TransitionResult> {
  const rows = await db.run<Record<string, unknown>>(st, values);
  if (!rows[0]) throw notFound();
  return resultOf(rows[0]);
}

export type TransitionValues = Readonly<Record<string, unknown>> & { scope: string; key: string };

/** Runs the many-row form on `inputs` (distinct keys): the answer of each, by `identityOf`; none for a missing row. */
export async function transitionMany(
  db: Database,
  f: FoldedTransition,
  inputs: readonly TransitionValues[],
): Promise<Map<string, TransitionResult>> {
  const rows = await db.run<Record<string, unknown>>(f.many, arrayValues(f.names, inputs));
  return byIdentity(rows.map(resultOf), (r) => r.row);
}

async function transitionOne(
  db: Database,
  f: FoldedTransition,
  v: TransitionValues,
): Promise<TransitionResult | undefined> {
  const rows = await db.run<Record<string, unknown>>(f.one, v);
  return rows[0] ? resultOf(rows[0]) : undefined;
}

/**
 * Runs a folded transition: alone, or, on a database that coalesces, in one
 * statement with concurrent calls of the same shape. Each call gets its own
 * answer; no row at all is NOT_FOUND.
 */
export async function foldedTransition(
  db: Database,
  f: FoldedTransition,
  values: TransitionValues,
): Promise<TransitionResult> {
  const co = coalescerFor(db, f.one.name, f.fold);
  const r = co ? await co.run(values) : await transitionOne(db, f, values);
  if (!r) throw notFound();
  return r;
}
