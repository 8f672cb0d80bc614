/**
 * Operator transitions: approve, reject, resolve. One guarded statement each
 * (see `transition.ts`), the operator's identity in the row and the event.
 *
 *   approve: pending_approval (deadline not passed) -> ready
 *            [and the fingerprint the approver saw, if given, is the row's]
 *   reject:  pending_approval (deadline not passed) -> rejected
 *   resolve: outcome_unknown, or in_progress whose lease expired
 *            -> succeeded | failed (lease kept: its holder's late complete is
 *               compared with this outcome) | ready (lease cleared: re-armed,
 *               the last holder is superseded)
 *            [and attempt = expectedAttempt, if given: compare-and-set]
 */
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { type TransitionResult, transition } from './transition.js';

interface OperatorCall {
  scope: string;
  key: string;
  actor: string;
}

const PENDING = sql`cur.eff_status = 'pending_approval'`;

export function approve(
  db: Database,
  c: OperatorCall & { fingerprint: string | null; note: string | null },
): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: sql`${PENDING} AND (${c.fingerprint}::text IS NULL OR cur.fingerprint = ${c.fingerprint}::text)`,
    set: sql`status = 'ready', approval_state = 'approved', approval_decided_by = ${c.actor},
      approval_decided_at = now(), approval_note = ${c.note}, updated_at = now(),
      retained_until = now() + cur.retention_ms * interval '1 millisecond', version = cur.version + 1`,
    event: { type: sql`'approved'`, detail: sql`jsonb_build_object('note', approval_note)` },
    refusal: {
      when: sql`${PENDING}`,
      type: sql`'approval_refused'`,
      detail: sql`jsonb_build_object('reason', 'fingerprint_mismatch', 'fingerprint', ${c.fingerprint}::text)`,
    },
  });
}

export function reject(
  db: Database,
  c: OperatorCall & { note: string | null; result: string | null },
): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: PENDING,
    set: sql`status = 'rejected', approval_state = 'rejected', approval_decided_by = ${c.actor},
      approval_decided_at = now(), approval_note = ${c.note},
      result = COALESCE(${c.result}::jsonb, jsonb_build_object('code', 'APPROVAL_REJECTED', 'note', ${c.note}::text)),
      completed_at = now(), updated_at = now(),
      retained_until = now() + cur.retention_ms * interval '1 millisecond', version = cur.version + 1`,
    event: { type: sql`'rejected'`, detail: sql`jsonb_build_object('note', approval_note)` },
  });
}

export function resolve(
  db: Database,
  c: OperatorCall & {
    status: 'succeeded' | 'failed' | 'ready';
    note: string;
    result: string | null;
    expectedAttempt: number | null;
  },
): Promise<TransitionResult> {
  const terminal = c.status !== 'ready';
  // Effective status (rule A): a lapsed, never-dispatched lease reads `ready` and is not resolvable.
  const resolvable = sql`(cur.eff_status = 'outcome_unknown' OR (cur.eff_status = 'in_progress' AND NOT cur.lease_live))`;
  const attemptOk = sql`(${c.expectedAttempt}::int IS NULL OR cur.attempt = ${c.expectedAttempt}::int)`;
  return transition(db, {
    ...c,
    guard: sql`${resolvable} AND ${attemptOk}`,
    set: sql`status = ${c.status}, result = ${terminal ? c.result : null}::jsonb,
      resolution_by = ${c.actor}, resolution_at = now(), resolution_note = ${c.note},
      completed_at = ${terminal ? sql`now()` : sql`NULL`},
      lease_id = ${terminal ? sql`cur.lease_id` : sql`NULL`},
      dispatched_at = ${terminal ? sql`cur.dispatched_at` : sql`NULL`},
      updated_at = now(), retained_until = now() + cur.retention_ms * interval '1 millisecond',
      version = cur.version + 1`,
    event: {
      type: sql`'resolved'`,
      detail: sql`jsonb_build_object('from', prev_status, 'to', status, 'note', resolution_note,
        'expectedAttempt', ${c.expectedAttempt}::int)`,
    },
    refusal: {
      when: sql`true`,
      type: sql`'resolution_refused'`,
      detail: sql`jsonb_build_object('to', ${c.status}::text, 'currentStatus', cur.eff_status,
        'attempt', cur.attempt, 'expectedAttempt', ${c.expectedAttempt}::int)`,
    },
  });
}
