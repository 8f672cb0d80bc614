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
import type { Database } from '../../db/database.js';
import { newId } from '../ids.js';
import { type TransitionResult, transition, transitionStatement } from './transition.js';

interface OperatorCall {
  scope: string;
  key: string;
  actor: string;
}

const PENDING = `cur.eff_status = 'pending_approval'`;

const APPROVE = transitionStatement({
  name: 'approve',
  guard: `${PENDING} AND ($fingerprint::text IS NULL OR cur.fingerprint = $fingerprint::text)`,
  set: `status = 'ready', approval_state = 'approved', approval_decided_by = $actor::text,
        approval_decided_at = cur.now, approval_note = $note::text, retained_until = cur.retain_until`,
  event: { type: `'approved'`, detail: `jsonb_build_object('note', u.approval_note)` },
  refusal: {
    when: PENDING,
    type: `'approval_refused'`,
    detail: `jsonb_build_object('reason', 'fingerprint_mismatch', 'fingerprint', $fingerprint::text)`,
  },
});

const REJECT = transitionStatement({
  name: 'reject',
  guard: PENDING,
  set: `status = 'rejected', approval_state = 'rejected', approval_decided_by = $actor::text,
        approval_decided_at = cur.now, approval_note = $note::text,
        result = $result::jsonb,
        completed_at = cur.now, retained_until = cur.retain_until`,
  event: { type: `'rejected'`, detail: `jsonb_build_object('note', u.approval_note)` },
});

// Effective status: a lapsed, never-dispatched lease reads `ready` and is not resolvable.
const RESOLVABLE = `(cur.eff_status = 'outcome_unknown' OR (cur.eff_status = 'in_progress' AND NOT cur.lease_live))`;
const TERMINAL = `$status::text <> 'ready'`;

const RESOLVE = transitionStatement({
  name: 'resolve',
  guard: `${RESOLVABLE} AND ($expectedAttempt::int IS NULL OR cur.attempt = $expectedAttempt::int)`,
  set: `status = $status::text, result = CASE WHEN ${TERMINAL} THEN $result::jsonb END,
        resolution_by = $actor::text, resolution_at = cur.now, resolution_note = $note::text,
        completed_at = CASE WHEN ${TERMINAL} THEN cur.now END,
        lease_id = CASE WHEN ${TERMINAL} THEN cur.lease_id END,
        dispatched_at = CASE WHEN ${TERMINAL} THEN cur.dispatched_at END,
        retained_until = cur.retain_until`,
  event: {
    type: `'resolved'`,
    detail: `jsonb_build_object('from', cur.eff_status, 'to', u.status, 'note', u.resolution_note,
        'expectedAttempt', $expectedAttempt::int)`,
  },
  refusal: {
    when: 'true',
    type: `'resolution_refused'`,
    detail: `jsonb_build_object('to', $status::text, 'currentStatus', cur.eff_status,
        'attempt', cur.attempt, 'expectedAttempt', $expectedAttempt::int)`,
  },
});

const base = (c: OperatorCall) => ({ scope: c.scope, key: c.key, actor: c.actor, eventId: newId() });

export function runApprove(
  db: Database,
  c: OperatorCall & { fingerprint: string | null; note: string | null },
): Promise<TransitionResult> {
  return transition(db, APPROVE, { ...base(c), fingerprint: c.fingerprint, note: c.note });
}

export function runReject(
  db: Database,
  c: OperatorCall & { note: string | null; result: string | null },
): Promise<TransitionResult> {
  return transition(db, REJECT, { ...base(c), note: c.note, result: c.result });
}

export function runResolve(
  db: Database,
  c: OperatorCall & {
    status: 'succeeded' | 'failed' | 'ready';
    note: string;
    result: string | null;
    expectedAttempt: number | null;
  },
): Promise<TransitionResult> {
  return transition(db, RESOLVE, {
    ...base(c),
    status: c.status,
    note: c.note,
    result: c.result,
    expectedAttempt: c.expectedAttempt,
  });
}
