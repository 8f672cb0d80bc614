/**
 * How a stored row reads, in SQL fragments every statement shares.
 *
 * Lease expiry by effect class ("rule A") and the approval deadline are
 * decided HERE, once, by `effStatus`: at every read and every write, by the
 * database clock, whether or not anything has written the lapsed state yet.
 *
 *   in_progress, lease expired, never dispatched           -> ready
 *   in_progress, lease expired, dispatched, non-idempotent -> outcome_unknown
 *   in_progress, lease expired, dispatched, read/idempotent -> in_progress
 *                                  (the next begin recovers it)
 *   pending_approval, deadline passed                       -> rejected
 *
 * Every other lapsed column (`lapsedColumns`) is derived from that one status.
 * A lapse is dated when it happened (lease expiry, approval deadline), not
 * when it was noticed, so a row reads the same before and after the sweeper
 * writes it.
 *
 * The database's time enters each statement once, as a value: a FROM item
 * `(SELECT now() AS now) c` that references no column. Columns are compared
 * with `c.now` or added to it only in SELECT lists; an UPDATE copies values
 * that were computed so (Citus refuses a STABLE function over columns in an
 * UPDATE, and any non-immutable function inside CASE there).
 */
import type { Operation, OperationStatus } from '../../contract/index.js';

/** The FROM item that brings the database's time into a statement, once. */
export const CLOCK = '(SELECT now() AS now) c';

/**
 * A timestamp as exact microseconds since the epoch, as text (a JS number would
 * round it): the list's cursor, the sweeper's scan floor.
 */
export const epochMicros = (t: string) => `((extract(epoch FROM ${t}) * 1000000)::bigint)::text`;

/** The stored columns of `idem_operations`, for explicit UNION arms. */
export const COLUMNS = [
  'scope',
  'key',
  'id',
  'fingerprint',
  'effect',
  'status',
  'attempt',
  'version',
  'lease_id',
  'lease_owner',
  'lease_expires_at',
  'dispatched_at',
  'lease_recovered',
  'request',
  'result',
  'metadata',
  'approval_state',
  'approval_deadline',
  'approval_decided_by',
  'approval_decided_at',
  'approval_note',
  'resolution_by',
  'resolution_at',
  'resolution_note',
  'retention_ms',
  'created_at',
  'updated_at',
  'completed_at',
  'retained_until',
] as const;

/** `r.scope, r.key, ...`: the stored columns of the row `r`. */
export const columnsOf = (r: string) => COLUMNS.map((c) => `${r}.${c}`).join(', ');

/** The effective status of row `r` at time `now`: the one place the lapse rules are written. */
export const effStatus = (r: string, now: string) => `CASE
    WHEN ${r}.status = 'in_progress' AND ${r}.lease_expires_at <= ${now} THEN
      CASE WHEN ${r}.dispatched_at IS NULL THEN 'ready'
           WHEN ${r}.effect IN ('non_idempotent_write', 'unclassified') THEN 'outcome_unknown'
           ELSE 'in_progress' END
    WHEN ${r}.status = 'pending_approval' AND ${r}.approval_deadline <= ${now} THEN 'rejected'
    ELSE ${r}.status END`;

/**
 * The columns of row `r` as they read once its effective status `eff` is
 * applied. Only a lapse changes them: `eff <> r.status`.
 */
export function lapsedColumns(r: string, eff: string) {
  const expired = `(${eff} = 'rejected' AND ${r}.status = 'pending_approval')`;
  const leaseLapsed = `(${eff} IN ('ready', 'outcome_unknown') AND ${r}.status = 'in_progress')`;
  return {
    updated_at: `CASE WHEN ${leaseLapsed} THEN ${r}.lease_expires_at
      WHEN ${expired} THEN ${r}.approval_deadline ELSE ${r}.updated_at END`,
    completed_at: `CASE WHEN ${expired} THEN ${r}.approval_deadline ELSE ${r}.completed_at END`,
    retained_until: `CASE WHEN ${eff} = 'ready' AND ${r}.status = 'in_progress'
        THEN ${r}.lease_expires_at + ${r}.retention_ms * interval '1 millisecond'
      WHEN ${expired} THEN ${r}.approval_deadline + ${r}.retention_ms * interval '1 millisecond'
      ELSE ${r}.retained_until END`,
    result: `CASE WHEN ${expired} THEN '{"code":"APPROVAL_EXPIRED"}'::jsonb ELSE ${r}.result END`,
    approval_state: `CASE WHEN ${expired} THEN 'expired' ELSE ${r}.approval_state END`,
    approval_decided_at: `CASE WHEN ${expired} THEN ${r}.approval_deadline ELSE ${r}.approval_decided_at END`,
  };
}

/**
 * The FROM item that gives row `r` its effective status `e.eff`, evaluated
 * once per row (OFFSET 0 keeps the planner from copying the expression into
 * every reference). Needs `c.now` in scope. It holds only immutable
 * operators: Citus pushes a FROM-less subquery into a multi-shard query only
 * then (`timestamptz + interval` is STABLE, so the lapsed columns are computed
 * in the select list instead).
 */
export const effectiveOf = (r: string) =>
  `CROSS JOIN LATERAL (SELECT ${effStatus(r, 'c.now')} AS eff OFFSET 0) e`;

/**
 * Every column a statement answers with, over row `r`, `e.eff` and `c.now`
 * (see `effectiveOf`). Timestamps leave as timestamptz; they reach the
 * ledger as epoch milliseconds on both drivers (`fromDb`).
 */
export const projection = (r: string) => {
  const l = lapsedColumns(r, 'e.eff');
  return `${r}.id, ${r}.scope, ${r}.key, ${r}.fingerprint, ${r}.effect,
    ${r}.status AS "storedStatus", e.eff AS status, ${r}.attempt, ${r}.version,
    ${r}.lease_id AS "leaseId", ${r}.lease_owner AS "leaseOwner",
    ${r}.lease_expires_at AS "leaseExpiresAt", ${r}.dispatched_at AS "dispatchedAt",
    ${r}.lease_recovered AS "leaseRecovered", (${r}.lease_expires_at <= c.now) AS "leaseExpired",
    GREATEST(1, ceil(date_part('epoch', ${r}.lease_expires_at - c.now)))::int AS "leaseSecondsLeft",
    ${r}.request, ${l.result} AS result, ${r}.metadata, ${l.approval_state} AS "approvalState",
    ${r}.approval_deadline AS "approvalDeadline", ${r}.approval_decided_by AS "approvalDecidedBy",
    ${l.approval_decided_at} AS "approvalDecidedAt", ${r}.approval_note AS "approvalNote",
    ${r}.resolution_by AS "resolutionBy", ${r}.resolution_at AS "resolutionAt",
    ${r}.resolution_note AS "resolutionNote", ${r}.retention_ms::float8 AS "retentionMs",
    ${r}.created_at AS "createdAt", ${l.updated_at} AS "updatedAt", ${l.completed_at} AS "completedAt",
    ${l.retained_until} AS "retainedUntil"`;
};

/** A row as the ledger reads it: effective status applied, times in epoch milliseconds. */
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

const TIMES = [
  'leaseExpiresAt',
  'dispatchedAt',
  'approvalDeadline',
  'approvalDecidedAt',
  'resolutionAt',
  'createdAt',
  'updatedAt',
  'completedAt',
  'retainedUntil',
] as const;

/**
 * The ledger works in epoch milliseconds. node-postgres's hot path already
 * reads timestamptz so (`db/statement-query.ts`); PGlite and drizzle give `Date`s.
 */
export function fromDb<T extends OperationRow>(raw: Record<string, unknown>): T {
  const row = raw as Record<string, unknown>;
  for (const k of TIMES) {
    const v = row[k];
    if (v instanceof Date) row[k] = v.getTime();
  }
  return row as T;
}
