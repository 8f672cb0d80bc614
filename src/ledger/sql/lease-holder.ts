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
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { type TransitionResult, type TransitionSpec, transition } from './transition.js';

export interface HolderCall {
  scope: string;
  key: string;
  leaseId: string;
  actor: string;
}

const live = (leaseId: string) =>
  sql`cur.eff_status = 'in_progress' AND cur.lease_id = ${leaseId}::uuid AND cur.lease_live`;

/** A superseded holder's report is refused and recorded for operators. */
const superseded = (leaseId: string, call: string) => ({
  when: sql`cur.lease_id IS DISTINCT FROM ${leaseId}::uuid`,
  type: sql`'stale_completion_rejected'`,
  detail: sql`jsonb_build_object('call', ${call}::text, 'currentStatus', cur.eff_status)`,
});

const holderDetail = sql`jsonb_build_object('from', prev_status, 'to', status)`;

export function dispatch(db: Database, c: HolderCall): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: sql`${live(c.leaseId)} AND cur.dispatched_at IS NULL`,
    set: sql`dispatched_at = now(), updated_at = now(), version = cur.version + 1`,
    event: { type: sql`'dispatched'`, detail: sql`jsonb_build_object('leaseExpiresAt', lease_expires_at)` },
    // A repeated dispatch of a live, dispatched lease changes nothing and is fine.
    probe: live(c.leaseId),
  });
}

export function heartbeat(db: Database, c: HolderCall & { leaseMs: number }): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: live(c.leaseId),
    set: sql`lease_expires_at = now() + ${c.leaseMs}::int * interval '1 millisecond',
      updated_at = now(), version = cur.version + 1`,
    // Heartbeats are not transitions; they leave no event.
  });
}

export type CompleteCall = HolderCall & { status: 'succeeded' | 'failed'; result: string | null };

export function complete(db: Database, c: CompleteCall): Promise<TransitionResult> {
  return transition(db, completeSpec(c));
}

/** Exported for the benchmark's pgbench scripts. */
export function completeSpec(c: CompleteCall): TransitionSpec {
  // No result and `null` are the same result: both read as `result: null`.
  const same = sql`(cur.status = ${c.status}
    AND COALESCE(cur.result, 'null'::jsonb) = COALESCE(${c.result}::jsonb, 'null'::jsonb))`;
  return {
    ...c,
    guard: sql`cur.lease_id = ${c.leaseId}::uuid
      AND cur.eff_status IN ('in_progress', 'outcome_unknown', 'ready')`,
    set: sql`status = ${c.status}, result = ${c.result}::jsonb, completed_at = now(), updated_at = now(),
      retained_until = now() + cur.retention_ms * interval '1 millisecond', version = cur.version + 1`,
    event: {
      type: sql`CASE WHEN prev_status = 'outcome_unknown' THEN 'late_completion' ELSE 'completed' END`,
      detail: holderDetail,
    },
    refusal: {
      when: sql`(cur.lease_id IS DISTINCT FROM ${c.leaseId}::uuid)
        OR (cur.eff_status IN ('succeeded', 'failed') AND NOT ${same})`,
      type: sql`CASE WHEN cur.lease_id IS DISTINCT FROM ${c.leaseId}::uuid
        THEN 'stale_completion_rejected' ELSE 'result_mismatch' END`,
      detail: sql`jsonb_build_object('status', ${c.status}::text, 'currentStatus', cur.eff_status)`,
    },
    probe: same,
  };
}

export function release(db: Database, c: HolderCall): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: sql`cur.lease_id = ${c.leaseId}::uuid AND cur.eff_status IN ('in_progress', 'outcome_unknown')`,
    set: sql`status = 'ready', dispatched_at = NULL, updated_at = now(),
      retained_until = now() + cur.retention_ms * interval '1 millisecond', version = cur.version + 1`,
    event: { type: sql`'released'`, detail: holderDetail },
    refusal: superseded(c.leaseId, 'release'),
  });
}

export function markUnknown(db: Database, c: HolderCall): Promise<TransitionResult> {
  return transition(db, {
    ...c,
    guard: sql`cur.lease_id = ${c.leaseId}::uuid AND cur.eff_status = 'in_progress'`,
    set: sql`status = 'outcome_unknown', updated_at = now(), version = cur.version + 1`,
    event: { type: sql`'marked_unknown'`, detail: holderDetail },
    refusal: superseded(c.leaseId, 'unknown'),
  });
}
