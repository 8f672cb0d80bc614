/**
 * How a stored row reads. Rule A and the approval deadline are applied here,
 * at every read, by the database clock, whether or not anything has written
 * the lapsed state yet:
 *
 *   in_progress, lease expired, never dispatched          -> ready
 *   in_progress, lease expired, dispatched, non-idempotent -> outcome_unknown
 *   in_progress, lease expired, dispatched, read/idempotent -> in_progress
 *                                (the next begin recovers it)
 *   pending_approval, deadline passed                      -> rejected
 *
 * `VIEW` selects from any relation shaped like `idem_operations` (the table, or
 * a CTE's `RETURNING *`), so every statement answers with the same columns.
 */
import { sql } from 'drizzle-orm';
import type { Operation, OperationStatus } from '../../contract/index.js';

// The three lapses, over unqualified columns of one row.
const LEASE_LAPSED = `status = 'in_progress' AND lease_expires_at <= now()`;
export const LAPSED_TO_READY = `(${LEASE_LAPSED} AND dispatched_at IS NULL)`;
export const LAPSED_TO_UNKNOWN = `(${LEASE_LAPSED} AND dispatched_at IS NOT NULL
  AND effect IN ('non_idempotent_write', 'unclassified'))`;
export const APPROVAL_LAPSED = `(status = 'pending_approval' AND approval_deadline <= now())`;
export const ANY_LAPSE = `(${LAPSED_TO_READY} OR ${LAPSED_TO_UNKNOWN} OR ${APPROVAL_LAPSED})`;

/**
 * Column values of a lapsed row. The read view and the statement that writes
 * the lapse (`lapse.ts`) use these same expressions, and each lapse is dated
 * at the moment it happened (lease expiry, approval deadline), not when it was
 * noticed: a row reads the same before and after the sweeper writes it.
 */
export const LAPSED = {
  status: `CASE WHEN ${LAPSED_TO_READY} THEN 'ready' WHEN ${LAPSED_TO_UNKNOWN} THEN 'outcome_unknown'
    WHEN ${APPROVAL_LAPSED} THEN 'rejected' ELSE status END`,
  updatedAt: `CASE WHEN ${LAPSED_TO_READY} OR ${LAPSED_TO_UNKNOWN} THEN lease_expires_at
    WHEN ${APPROVAL_LAPSED} THEN approval_deadline ELSE updated_at END`,
  completedAt: `CASE WHEN ${APPROVAL_LAPSED} THEN approval_deadline ELSE completed_at END`,
  retainedUntil: `CASE WHEN ${LAPSED_TO_READY} THEN lease_expires_at + retention_ms * interval '1 millisecond'
    WHEN ${APPROVAL_LAPSED} THEN approval_deadline + retention_ms * interval '1 millisecond'
    ELSE retained_until END`,
  result: `CASE WHEN ${APPROVAL_LAPSED} THEN '{"code":"APPROVAL_EXPIRED"}'::jsonb ELSE result END`,
  approvalState: `CASE WHEN ${APPROVAL_LAPSED} THEN 'expired' ELSE approval_state END`,
  approvalDecidedAt: `CASE WHEN ${APPROVAL_LAPSED} THEN approval_deadline ELSE approval_decided_at END`,
} as const;

/** Every column a statement answers with, rule A and deadlines applied. */
/** Timestamps leave the database as epoch milliseconds: one shape on both drivers. */
const ms = (expr: string) => `(extract(epoch FROM ${expr}) * 1000)::float8`;

/** Every column a statement answers with, rule A and deadlines applied. */
export const VIEW = sql.raw(`
  id, scope, key, fingerprint, effect, status AS "storedStatus", ${LAPSED.status} AS status,
  attempt, version, lease_id AS "leaseId", lease_owner AS "leaseOwner",
  ${ms('lease_expires_at')} AS "leaseExpiresAt", ${ms('dispatched_at')} AS "dispatchedAt",
  lease_recovered AS "leaseRecovered", (lease_expires_at <= now()) AS "leaseExpired",
  GREATEST(1, ceil(extract(epoch FROM lease_expires_at - now())))::int AS "leaseSecondsLeft",
  request, ${LAPSED.result} AS result, metadata,
  ${LAPSED.approvalState} AS "approvalState", ${ms('approval_deadline')} AS "approvalDeadline",
  approval_decided_by AS "approvalDecidedBy", ${ms(LAPSED.approvalDecidedAt)} AS "approvalDecidedAt",
  approval_note AS "approvalNote",
  resolution_by AS "resolutionBy", ${ms('resolution_at')} AS "resolutionAt", resolution_note AS "resolutionNote",
  retention_ms::float8 AS "retentionMs",
  ${ms('created_at')} AS "createdAt", ${ms(LAPSED.updatedAt)} AS "updatedAt",
  ${ms(LAPSED.completedAt)} AS "completedAt", ${ms(LAPSED.retainedUntil)} AS "retainedUntil"`);

export interface OperationRow {
  id: string;
  scope: string;
  key: string;
  fingerprint: string;
  effect: Operation['effect'];
  storedStatus: OperationStatus;
  status: OperationStatus;
  attempt: number;
  version: number;
  leaseId: string | null;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  dispatchedAt: number | null;
  leaseRecovered: boolean;
  leaseExpired: boolean | null;
  /** Whole seconds left on the lease by the database clock (at least 1), for `Retry-After`. */
  leaseSecondsLeft: number | null;
  request: unknown;
  result: unknown;
  metadata: Record<string, unknown>;
  approvalState: string | null;
  approvalDeadline: number | null;
  approvalDecidedBy: string | null;
  approvalDecidedAt: number | null;
  approvalNote: string | null;
  resolutionBy: string | null;
  resolutionAt: number | null;
  resolutionNote: string | null;
  retentionMs: number;
  createdAt: number;
  updatedAt: number;
  completedAt: number | null;
  retainedUntil: number | null;
}

/** Epoch milliseconds to RFC 3339. */
export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The public shape of a row. The lease id never leaves through here. */
export function toOperation(r: OperationRow): Operation {
  const leased = r.status === 'in_progress' || r.status === 'outcome_unknown';
  return {
    id: r.id,
    scope: r.scope,
    key: r.key,
    fingerprint: r.fingerprint,
    effect: r.effect,
    status: r.status,
    attempt: r.attempt,
    lease:
      leased && r.leaseExpiresAt
        ? { expiresAt: iso(r.leaseExpiresAt)!, owner: r.leaseOwner, dispatchedAt: iso(r.dispatchedAt) }
        : null,
    request: r.request ?? null,
    result: r.result ?? null,
    approval:
      r.approvalState && r.approvalDeadline
        ? {
            state: r.approvalState as 'pending' | 'approved' | 'rejected' | 'expired',
            deadline: iso(r.approvalDeadline)!,
            decidedBy: r.approvalDecidedBy,
            decidedAt: iso(r.approvalDecidedAt),
            note: r.approvalNote,
          }
        : null,
    metadata: r.metadata ?? {},
    resolution:
      r.resolutionBy && r.resolutionAt
        ? { by: r.resolutionBy, at: iso(r.resolutionAt)!, note: r.resolutionNote ?? '' }
        : null,
    createdAt: iso(r.createdAt)!,
    updatedAt: iso(r.updatedAt)!,
    completedAt: iso(r.completedAt),
    retainedUntil: iso(r.retainedUntil),
  };
}
