/**
 * begin, step one: register a new key, or acquire an existing acquirable one,
 * or read what is there, in ONE statement.
 *
 * The claim goes through the unique key (`INSERT ... ON CONFLICT`), never a
 * check-then-insert. When the key exists, the conflict arm acquires it only if
 * the stored fingerprint matches and the row may be taken over:
 *
 *   ready                                                   -> acquire
 *   in_progress, lease expired, never dispatched            -> acquire (rule A)
 *   in_progress, lease expired, dispatched, read/idempotent -> acquire, recovered
 *   anything else                                           -> left alone, read back
 *
 *   begin ──┬─ no row ───────────────▶ INSERT (created: in_progress or pending_approval)
 *           └─ row (scope, key) ─────▶ ON CONFLICT DO UPDATE ... WHERE <above>
 *                                        │ false: the row is returned as read
 *
 * Times come from the database: `now()` in VALUES, then `EXCLUDED.updated_at`
 * in the conflict arm (Citus wants no `now()` there, see scale-out.md).
 * The read arm uses the statement's snapshot; when a concurrent insert is not
 * yet visible it finds nothing and the caller runs the statement again.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Effect } from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import { insertEventsFrom } from './events.js';
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

/** The statement itself (exported for the benchmark's pgbench scripts). */
export function beginStatement(i: BeginInput): SQL {
  const approval = i.requireApproval;
  return sql`
    WITH written AS (
      INSERT INTO idem_operations AS o (
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
      ON CONFLICT (scope, key) DO UPDATE SET
        status = 'in_progress',
        attempt = o.attempt + 1,
        version = o.version + 1,
        lease_id = ${i.leaseId}::uuid,
        lease_owner = ${i.owner},
        lease_expires_at = EXCLUDED.updated_at + ${i.leaseMs}::int * interval '1 millisecond',
        dispatched_at = CASE WHEN ${i.dispatch}::boolean THEN EXCLUDED.updated_at END,
        lease_recovered = (o.status = 'in_progress' AND o.dispatched_at IS NOT NULL),
        updated_at = EXCLUDED.updated_at,
        retained_until = NULL
      WHERE o.fingerprint = EXCLUDED.fingerprint
        AND (o.status = 'ready'
          OR (o.status = 'in_progress' AND o.lease_expires_at <= EXCLUDED.updated_at
              AND (o.dispatched_at IS NULL OR o.effect IN ('read', 'idempotent_write'))))
      RETURNING *
    ), ev AS (
      ${insertEventsFrom(
        sql`written`,
        sql`CASE WHEN id = ${i.newId}::uuid THEN 'created' ELSE 'acquired' END`,
        i.actor,
        sql`jsonb_build_object('status', status, 'owner', lease_owner,
              'dispatched', dispatched_at IS NOT NULL, 'recovered', lease_recovered)`,
      )}
    )
    SELECT 'written' AS via, ${VIEW} FROM written
    UNION ALL
    SELECT 'read' AS via, ${VIEW} FROM idem_operations
    WHERE scope = ${i.scope} AND key = ${i.key} AND NOT EXISTS (SELECT 1 FROM written)`;
}

export async function insertOrAcquire(db: Database, i: BeginInput): Promise<BeginRow | undefined> {
  const rows = await db.rows<BeginRow>(beginStatement(i));
  return rows[0];
}
