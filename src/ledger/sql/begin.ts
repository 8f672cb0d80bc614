/**
 * begin's statements.
 *
 * 1. `BEGIN_INSERT`: claim a new key through the unique key
 *    (`INSERT ... ON CONFLICT DO NOTHING`), never check-then-insert; when the
 *    key exists, the same statement answers with the row. An existing key
 *    costs no write, no lock and no commit flush: replays and "in progress"
 *    answers are reads. For a key this process has seen lately (a retry, a
 *    replay) the caller asks `read_by_key` first instead: a plain read, which
 *    Postgres runs at 41,000/s on 16 connections (pgbench) against 26,000/s
 *    for the read-first insert statement it replaced (itself cheaper than
 *    the insert's conflict path) and 54,000/s for a bare primary-key read.
 *    Only when it finds nothing does `BEGIN_INSERT` run. Both ways answer the
 *    same for every key.
 *
 * 2. `ACQUIRE`: take over an existing row, one guarded transition whose guard
 *    is the whole rule, checked on the locked, newest row version:
 *
 *      fingerprint matches AND (
 *        ready (released, approved, re-armed, or lapsed before dispatch) -> acquire
 *        in_progress, lease expired, dispatched, read/idempotent         -> acquire, recovered)
 *
 *    When it does not hold, the statement answers with the row as it now is.
 *
 *   begin ──▶ INSERT ... ON CONFLICT DO NOTHING ──┬─ inserted: created (in_progress | pending_approval)
 *                                                 └─ conflict: read back ──▶ decide
 *                                                        acquirable? ──▶ ACQUIRE ──▶ acquired, or decide again
 *
 * The read uses the statement's snapshot: when a concurrent insert that is
 * not yet visible wins the key, the statement answers nothing, and the
 * caller runs it again.
 *
 * 3. `LAPSE`: write the lapse a read already shows (an unknown outcome or an
 *    expired approval about to be answered), so lists and the log agree.
 */
import type { Effect } from '../../contract/index.js';
import {
  arrayValues,
  byIdentity,
  coalescerFor,
  type Fold,
  identityOf,
  unnestInput,
} from '../../db/coalesce.js';
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';
import { newId } from '../ids.js';
import { insertEvent } from './events.js';
import { readByKey } from './read.js';
import {
  CLOCK,
  columnsOf,
  effectiveOf,
  fromDb,
  lapsedColumns,
  type OperationRow,
  projection,
} from './row.js';
import { type TransitionResult, transition, transitionStatement } from './transition.js';

export interface NewOperation {
  scope: string;
  key: string;
  fingerprint: string;
  effect: Effect;
  leaseId: string;
  leaseMs: number;
  dispatch: boolean;
  owner: string | null;
  requireApproval: boolean;
  approvalTimeoutMs: number;
  /** Canonical JSON text, or null when not stored. */
  request: string | null;
  metadata: string;
  retentionMs: number;
  actor: string;
}

export type BeginRow = OperationRow & { via: 'written' | 'read' };

const INSERT_COLUMNS = `
      scope, key, id, fingerprint, effect, status, attempt, version,
      lease_id, lease_owner, lease_expires_at, dispatched_at, lease_recovered,
      request, metadata, approval_state, approval_deadline, retention_ms, created_at, updated_at`;

const INSERT_VALUES = `
      $scope, $key, $id::uuid, $fingerprint, $effect, $status, $attempt::int, 1,
      $leaseId::uuid, $owner::text, now() + $leaseMs::int * interval '1 millisecond',
      CASE WHEN $dispatch::boolean THEN now() END, false,
      $request::jsonb, $metadata::jsonb, $approvalState::text,
      now() + $approvalMs::bigint * interval '1 millisecond',
      $retentionMs::bigint, now(), now()`;

const CREATED_EVENT = insertEvent({
  from: 'written w',
  row: 'w',
  id: '$eventId::uuid',
  type: `'created'`,
  at: 'w.created_at',
  actor: '$actor::text',
  detail: `jsonb_build_object('status', w.status, 'owner', w.lease_owner, 'dispatched', w.dispatched_at IS NOT NULL)`,
});

/** The answer: the written row, or the one read back on a conflict. */
const ANSWER = `
  SELECT r.via, ${projection('r')}
  FROM found r CROSS JOIN ${CLOCK} ${effectiveOf('r')}`;

/**
 * Insert first, read back on a conflict: for a new key the insert's own
 * conflict check is the only index probe. Exported for the benchmark's
 * pgbench scripts.
 */
export const BEGIN_INSERT = statement(
  'begin_insert',
  `
  WITH written AS (
    INSERT INTO idem_operations (${INSERT_COLUMNS})
    VALUES (${INSERT_VALUES})
    ON CONFLICT (scope, key) DO NOTHING
    RETURNING *
  ), ev AS (
    ${CREATED_EVENT}
  ), found AS (
    SELECT 'written' AS via, ${columnsOf('w')} FROM written w
    UNION ALL
    SELECT 'read', ${columnsOf('o')} FROM idem_operations o
    WHERE o.scope = $scope AND o.key = $key AND NOT EXISTS (SELECT 1 FROM written)
  )${ANSWER}`,
);

/**
 * Several new keys in one statement (coalescing, `db/coalesce.ts`): the same
 * statement as `BEGIN_INSERT` over the rows of `input`, each parameter an
 * array with one element per begin. Each input gets the row `BEGIN_INSERT`
 * would have answered alone: its own written row and `created` event, or on
 * a conflict the row read back, or nothing when a concurrent insert not yet
 * visible won the key. The rows are inserted in key order, so two batches
 * that share keys wait for each other instead of deadlocking.
 */
const MANY_TYPES: Record<string, string> = {
  scope: 'text',
  key: 'text',
  id: 'uuid',
  fingerprint: 'text',
  effect: 'text',
  status: 'text',
  attempt: 'int',
  leaseId: 'uuid',
  owner: 'text',
  leaseMs: 'int',
  dispatch: 'boolean',
  request: 'jsonb',
  metadata: 'jsonb',
  approvalState: 'text',
  approvalMs: 'bigint',
  retentionMs: 'bigint',
  eventId: 'uuid',
  actor: 'text',
};
const MANY_NAMES = Object.keys(MANY_TYPES);

export const BEGIN_INSERT_MANY = statement(
  'begin_insert_many',
  `
  WITH input AS (
    ${unnestInput(MANY_NAMES, MANY_TYPES)}
  ), written AS (
    INSERT INTO idem_operations (${INSERT_COLUMNS})
    SELECT ${INSERT_VALUES.replace(/\$([A-Za-z]+)/g, 'i."$1"')}
    FROM input i ORDER BY i.scope, i.key
    ON CONFLICT (scope, key) DO NOTHING
    RETURNING *
  ), ev AS (
    ${insertEvent({
      from: 'written w JOIN input i ON i.scope = w.scope AND i.key = w.key',
      row: 'w',
      id: 'i."eventId"',
      type: `'created'`,
      at: 'w.created_at',
      actor: 'i.actor',
      detail: `jsonb_build_object('status', w.status, 'owner', w.lease_owner, 'dispatched', w.dispatched_at IS NOT NULL)`,
    })}
  ), found AS (
    SELECT 'written' AS via, ${columnsOf('w')} FROM written w
    UNION ALL
    SELECT 'read', ${columnsOf('o')} FROM input i
      -- One primary-key read per input: OFFSET 0 keeps the subquery from becoming a join.
      CROSS JOIN LATERAL (SELECT * FROM idem_operations o WHERE o.scope = i.scope AND o.key = i.key OFFSET 0) o
    WHERE NOT EXISTS (SELECT 1 FROM written w WHERE w.scope = i.scope AND w.key = i.key)
  )${ANSWER}`,
);

type BeginValues = ReturnType<typeof beginValues>;

/** The rows `BEGIN_INSERT_MANY` answered, by input identity. */
export async function insertMany(
  db: Database,
  inputs: readonly BeginValues[],
): Promise<Map<string, BeginRow>> {
  const rows = await db.run<Record<string, unknown>>(BEGIN_INSERT_MANY, arrayValues(MANY_NAMES, inputs));
  return byIdentity(
    rows.map((raw) => fromDb<BeginRow>(raw)),
    (row) => row,
  );
}

async function insertOne(db: Database, v: BeginValues): Promise<BeginRow | undefined> {
  const rows = await db.run<Record<string, unknown>>(BEGIN_INSERT, v);
  return rows[0] ? fromDb<BeginRow>(rows[0]) : undefined;
}

/** How begins fold (`db/coalesce.ts`). */
const beginFold = (db: Database): Fold<BeginValues, BeginRow | undefined> => ({
  identity: identityOf,
  one: (v) => insertOne(db, v),
  many: (vs) => insertMany(db, vs),
  absent: undefined,
});

/**
 * Insert a new key, or read the existing row. `likelyExists` (the key was seen
 * lately) reads first and inserts only when the read found nothing; either way
 * the answer is the same, only its cost differs. The unique key, never the
 * read, decides a race: a read that finds nothing is followed by the insert.
 * On a pooled database that coalesces, concurrent inserts may share one
 * statement (`BEGIN_INSERT_MANY`), each with its own answer.
 */
export async function insertOrRead(
  db: Database,
  i: NewOperation,
  likelyExists = false,
): Promise<BeginRow | undefined> {
  if (likelyExists) {
    const read = (await readByKey(db, i.scope, i.key)) as BeginRow | undefined;
    if (read) {
      read.via = 'read'; // fromDb's object is this call's own
      return read;
    }
  }
  const v = beginValues(i);
  const co = coalescerFor(db, BEGIN_INSERT.name, beginFold);
  return co ? co.run(v) : insertOne(db, v);
}

/** The values of `BEGIN_INSERT`, by parameter name (exported for the benchmark). */
export function beginValues(i: NewOperation, ids = { id: newId(), eventId: newId() }) {
  const approval = i.requireApproval;
  // A literal, not `{ ...ids, ... }`: on this V8 a spread followed by more
  // properties took about 25 µs here (the object goes to the slow path).
  return {
    id: ids.id,
    eventId: ids.eventId,
    scope: i.scope,
    key: i.key,
    fingerprint: i.fingerprint,
    effect: i.effect,
    status: approval ? 'pending_approval' : 'in_progress',
    attempt: approval ? 0 : 1,
    leaseId: approval ? null : i.leaseId,
    owner: i.owner,
    leaseMs: approval ? null : i.leaseMs,
    dispatch: !approval && i.dispatch,
    request: i.request,
    metadata: i.metadata,
    approvalState: approval ? 'pending' : null,
    approvalMs: approval ? i.approvalTimeoutMs : null,
    retentionMs: i.retentionMs,
    actor: i.actor,
  };
}

const ACQUIRE = transitionStatement({
  name: 'acquire',
  prepare: `c.now + $leaseMs::int * interval '1 millisecond' AS new_expiry`,
  guard: `cur.fingerprint = $fingerprint::text
    AND (cur.eff_status = 'ready' OR (cur.eff_status = 'in_progress' AND NOT cur.lease_live))`,
  set: `status = 'in_progress', attempt = cur.attempt + 1, lease_id = $leaseId::uuid,
        lease_owner = $owner::text, lease_expires_at = cur.new_expiry,
        dispatched_at = CASE WHEN $dispatch::boolean THEN cur.now END,
        -- recovered: a dispatched lease ran out (a lapse before dispatch reads ready)
        lease_recovered = (cur.status = 'in_progress' AND cur.dispatched_at IS NOT NULL),
        retained_until = NULL`,
  event: {
    type: `'acquired'`,
    detail: `jsonb_build_object('owner', u.lease_owner, 'dispatched', u.dispatched_at IS NOT NULL,
        'recovered', u.lease_recovered)`,
  },
});

/** Take over an existing, acquirable row; when the guard fails, the row as it now is. */
export function acquire(db: Database, i: NewOperation): Promise<TransitionResult> {
  return transition(db, ACQUIRE, {
    scope: i.scope,
    key: i.key,
    actor: i.actor,
    eventId: newId(),
    fingerprint: i.fingerprint,
    leaseMs: i.leaseMs,
    leaseId: i.leaseId,
    owner: i.owner,
    dispatch: i.dispatch,
  });
}

// Over the locked row's effective status (see `TransitionShape.derive`): rule A once per row.
const LAPSED = lapsedColumns('x', 'x.eff_status');

/** The lapse itself: its event is the transition's own lapse event (actor `system`). */
const LAPSE = transitionStatement({
  name: 'lapse',
  derive: Object.entries(LAPSED)
    .map(([k, v]) => `${v} AS lapsed_${k}`)
    .join(',\n        '),
  guard: 'cur.eff_status <> cur.status',
  updatedAt: 'cur.lapsed_updated_at',
  set: `status = cur.eff_status, ${Object.keys(LAPSED)
    .filter((k) => k !== 'updated_at')
    .map((k) => `${k} = cur.lapsed_${k}`)
    .join(', ')}`,
});

/** Writes the lapse of one operation, if it has lapsed. */
export async function lapseOne(db: Database, scope: string, key: string): Promise<OperationRow | undefined> {
  const r = await transition(db, LAPSE, { scope, key });
  return r.changed ? r.row : undefined;
}
