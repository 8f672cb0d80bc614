/**
 * The lease holder's transitions. Each is one guarded statement (see
 * `transition.ts`); a holder is "current" while its lease id is the row's:
 * a later acquisition or an operator's resolve to `ready` replaces it.
 *
 *   dispatch, heartbeat: current AND unexpired, status in_progress
 *   complete:            current, status in_progress / outcome_unknown / ready
 *                        (an expired lease that nobody superseded may still
 *                        report: the late completion of an unknown outcome)
 *   release:             current, status in_progress / outcome_unknown
 *   unknown:             current, status in_progress
 */
import type { Database } from '../../db/database.js';
import { newId } from '../ids.js';
import {
  foldedTransition,
  foldedTransitionStatement,
  type TransitionResult,
  transition,
  transitionStatement,
} from './transition.js';

export interface HolderCall {
  scope: string;
  key: string;
  leaseId: string;
  actor: string;
}

const LIVE = `cur.eff_status = 'in_progress' AND cur.lease_id = $leaseId::uuid AND cur.lease_live`;

/** A superseded holder's report is refused and recorded for operators. */
const superseded = (call: string) => ({
  when: `cur.lease_id IS DISTINCT FROM $leaseId::uuid`,
  type: `'stale_completion_rejected'`,
  detail: `jsonb_build_object('call', '${call}', 'currentStatus', cur.eff_status)`,
});

/** `from` and `to` of a holder's transition, and the holder's reason when it gave one. */
const HOLDER_DETAIL = `jsonb_build_object('from', cur.eff_status, 'to', u.status)`;
const WITH_REASON = `${HOLDER_DETAIL} || jsonb_strip_nulls(jsonb_build_object('reason', $reason::text))`;

const DISPATCH = transitionStatement({
  name: 'dispatch',
  guard: `${LIVE} AND cur.dispatched_at IS NULL`,
  set: 'dispatched_at = cur.now',
  event: { type: `'dispatched'`, detail: `jsonb_build_object('leaseExpiresAt', u.lease_expires_at)` },
  // A repeated dispatch of a live, dispatched lease changes nothing and is fine.
  alreadyDone: LIVE,
});

const HEARTBEAT = transitionStatement({
  name: 'heartbeat',
  prepare: `c.now + $leaseMs::int * interval '1 millisecond' AS new_expiry`,
  guard: LIVE,
  set: 'lease_expires_at = cur.new_expiry',
  // Heartbeats are not transitions; they leave no event.
});

// No result and `null` are the same result: both read as `result: null`.
const SAME_RESULT = `(cur.status = $status::text
  AND COALESCE(cur.result, 'null'::jsonb) = COALESCE($result::jsonb, 'null'::jsonb))`;

/** Exported for the benchmark's pgbench scripts. */
export const COMPLETE_FOLDED = foldedTransitionStatement(
  {
    name: 'complete',
    guard: `cur.lease_id = $leaseId::uuid AND cur.eff_status IN ('in_progress', 'outcome_unknown', 'ready')`,
    set: `status = $status::text, result = $result::jsonb, completed_at = cur.now,
        retained_until = cur.retain_until`,
    event: {
      type: `CASE WHEN cur.eff_status = 'outcome_unknown' THEN 'late_completion' ELSE 'completed' END`,
      detail: HOLDER_DETAIL,
    },
    refusal: {
      when: `(cur.lease_id IS DISTINCT FROM $leaseId::uuid)
      OR (cur.eff_status IN ('succeeded', 'failed') AND NOT ${SAME_RESULT})`,
      type: `CASE WHEN cur.lease_id IS DISTINCT FROM $leaseId::uuid
      THEN 'stale_completion_rejected' ELSE 'result_mismatch' END`,
      detail: `jsonb_build_object('status', $status::text, 'currentStatus', cur.eff_status)`,
    },
    alreadyDone: SAME_RESULT,
  },
  {
    scope: 'text',
    key: 'text',
    status: 'text',
    result: 'jsonb',
    leaseId: 'uuid',
    eventId: 'uuid',
    actor: 'text',
  },
);
export const COMPLETE = COMPLETE_FOLDED.one;

const RELEASE = transitionStatement({
  name: 'release',
  guard: `cur.lease_id = $leaseId::uuid AND cur.eff_status IN ('in_progress', 'outcome_unknown')`,
  set: `status = 'ready', dispatched_at = NULL, retained_until = cur.retain_until`,
  event: { type: `'released'`, detail: WITH_REASON },
  refusal: superseded('release'),
});

const MARK_UNKNOWN = transitionStatement({
  name: 'mark_unknown',
  guard: `cur.lease_id = $leaseId::uuid AND cur.eff_status = 'in_progress'`,
  set: `status = 'outcome_unknown'`,
  event: { type: `'marked_unknown'`, detail: WITH_REASON },
  refusal: superseded('unknown'),
});

/**
 * A holder call's values; the callers add their own fields to this fresh
 * object (never `{ ...values(c), x }`: on this V8 a spread followed by more
 * properties costs microseconds a call).
 */
const values = (c: HolderCall): Record<string, unknown> & { scope: string; key: string } => ({
  scope: c.scope,
  key: c.key,
  leaseId: c.leaseId,
  actor: c.actor,
  eventId: newId(),
});

export function runDispatch(db: Database, c: HolderCall): Promise<TransitionResult> {
  return transition(db, DISPATCH, values(c));
}

export function runHeartbeat(db: Database, c: HolderCall & { leaseMs: number }): Promise<TransitionResult> {
  return transition(db, HEARTBEAT, { scope: c.scope, key: c.key, leaseId: c.leaseId, leaseMs: c.leaseMs });
}

export type CompleteCall = HolderCall & { status: 'succeeded' | 'failed'; result: string | null };

export function runComplete(db: Database, c: CompleteCall): Promise<TransitionResult> {
  return foldedTransition(db, COMPLETE_FOLDED, completeValues(c));
}

/** The values of a complete, by parameter name (exported for the benchmark). */
export const completeValues = (c: CompleteCall) => {
  const v = values(c);
  v.status = c.status;
  v.result = c.result;
  return v;
};

/** `reason`: why the holder ended its lease, recorded in the event's detail. */
export type EndCall = HolderCall & { reason?: string | null };

const endValues = (c: EndCall) => {
  const v = values(c);
  v.reason = c.reason ?? null;
  return v;
};

export function runRelease(db: Database, c: EndCall): Promise<TransitionResult> {
  return transition(db, RELEASE, endValues(c));
}

export function runMarkUnknown(db: Database, c: EndCall): Promise<TransitionResult> {
  return transition(db, MARK_UNKNOWN, endValues(c));
}
