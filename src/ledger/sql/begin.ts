/**
 * begin's two statements.
 *
 * 1. `beginStatement`: claim a new key through the unique key
 *    (`INSERT ... ON CONFLICT DO NOTHING`), never check-then-insert; when the
 *    key exists, the same statement reads the row back. An existing key costs
 *    no write, no lock and no commit flush: replays and "in progress" answers
 *    are reads.
 *
 * 2. `acquireStatement`: take over an existing row, one guarded UPDATE whose
 *    WHERE is the whole rule, re-checked by Postgres on the newest row version:
 *
 *      fingerprint matches AND (
 *        ready                                                    -> acquire
 *        in_progress, lease expired, never dispatched (rule A)    -> acquire
 *        in_progress, lease expired, dispatched, read/idempotent  -> acquire, recovered)
 *
 *    If another writer got there first, it matches nothing and begin reads again.
 *
 *   begin ──▶ INSERT ... ON CONFLICT DO NOTHING ──┬─ inserted: created (in_progress | pending_approval)
 *                                                 └─ conflict: read back ──▶ decide
 *                                                        acquirable? ──▶ guarded UPDATE (or read again)
 *
 * The read arm uses the statement's snapshot: a concurrent insert that is not
 * yet visible finds nothing, and the caller runs the statement again.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Effect } from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import { insertEventsFrom, LAPSE_EVENT_DETAIL, LAPSE_EVENT_TYPE, STAMP, STAMP_CTE } from './events.js';
import { type OperationRow, VIEW } from './view.js';

export interface BeginInput {
  scope: string;
  key: string;
  /** Service-made UUID of the row, if this call creates it. */
  newId: string;
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

/** Insert a new key, or read the existing row (exported for the benchmark's pgbench scripts). */
export function beginStatement(i: BeginInput): SQL {
  const approval = i.requireApproval;
  return sql`
    WITH written AS (
      INSERT INTO idem_operations (
        scope, key, id, fingerprint, effect, status, attempt, version,
        lease_id, lease_owner, lease_expires_at, dispatched_at, lease_recovered,
        request, metadata, approval_state, approval_deadline, retention_ms, created_at, updated_at)
      VALUES (
        ${i.scope}, ${i.key}, ${i.newId}::uuid, ${i.fingerprint}, ${i.effect},
        ${approval ? 'pending_approval' : 'in_progress'}, ${approval ? 0 : 1}::int, 1,
        ${approval ? null : i.leaseId}::uuid, ${i.owner},
        ${approval ? null : i.leaseMs}::int * interval '1 millisecond' + now(),
        CASE WHEN ${!approval && i.dispatch}::boolean THEN now() END, false,
        ${i.request}::jsonb, ${i.metadata}::jsonb,
        ${approval ? 'pending' : null}::text,
        ${approval ? i.approvalTimeoutMs : null}::bigint * interval '1 millisecond' + now(),
        ${i.retentionMs}::bigint, now(), now())
      ON CONFLICT (scope, key) DO NOTHING
      RETURNING *
    ), ev AS (
      ${insertEventsFrom(
        sql`written`,
        sql`'created'`,
        i.actor,
        sql`jsonb_build_object('status', status, 'owner', lease_owner, 'dispatched', dispatched_at IS NOT NULL)`,
      )}
    )
    SELECT 'written' AS via, ${VIEW} FROM written
    UNION ALL
    SELECT 'read' AS via, ${VIEW} FROM idem_operations
    WHERE scope = ${i.scope} AND key = ${i.key} AND NOT EXISTS (SELECT 1 FROM written)`;
}

export async function insertOrRead(db: Database, i: BeginInput): Promise<BeginRow | undefined> {
  const rows = await db.rows<BeginRow>(beginStatement(i));
  return rows[0];
}

/** Take over an existing, acquirable row; nothing if the guard no longer holds. */
export function acquireStatement(i: BeginInput): SQL {
  return sql`
    WITH before AS (
      -- The row as this statement's snapshot sees it: was it a lease that lapsed
      -- before dispatch (rule A), read as ready but never written so?
      SELECT * FROM idem_operations WHERE scope = ${i.scope} AND key = ${i.key}
    ), ${STAMP_CTE}, acquired AS (
      UPDATE idem_operations SET
        status = 'in_progress',
        attempt = attempt + 1,
        version = version + 1,
        lease_id = ${i.leaseId}::uuid,
        lease_owner = ${i.owner},
        lease_expires_at = now() + ${i.leaseMs}::int * interval '1 millisecond',
        dispatched_at = CASE WHEN ${i.dispatch}::boolean THEN now() END,
        -- SET sees the old row: recovered means a dispatched lease ran out.
        lease_recovered = (status = 'in_progress' AND dispatched_at IS NOT NULL),
        updated_at = now(),
        retained_until = NULL
      WHERE scope = ${i.scope} AND key = ${i.key} AND fingerprint = ${i.fingerprint}
        AND (status = 'ready'
          OR (status = 'in_progress' AND lease_expires_at <= now()
              AND (dispatched_at IS NULL OR effect IN ('read', 'idempotent_write'))))
      RETURNING *
    ), lapse_ev AS (
      ${insertEventsFrom(
        sql`before`,
        LAPSE_EVENT_TYPE(sql`'ready'::text`),
        'system',
        LAPSE_EVENT_DETAIL(sql`'ready'::text`, sql`lease_expires_at`),
        sql`status = 'in_progress' AND dispatched_at IS NULL AND EXISTS (SELECT 1 FROM acquired)`,
        STAMP,
      )}
    ), ev AS (
      ${insertEventsFrom(
        sql`acquired`,
        sql`'acquired'`,
        i.actor,
        sql`jsonb_build_object('owner', lease_owner, 'dispatched', dispatched_at IS NOT NULL,
              'recovered', lease_recovered)`,
        sql`true`,
        STAMP,
      )}
    )
    SELECT ${VIEW} FROM acquired`;
}

export async function acquire(db: Database, i: BeginInput): Promise<OperationRow | undefined> {
  const rows = await db.rows<OperationRow>(acquireStatement(i));
  return rows[0];
}
