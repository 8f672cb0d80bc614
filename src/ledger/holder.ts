/**
 * Lease-holder calls: dispatch, heartbeat, complete, release, unknown.
 * Each runs one guarded statement (`sql/lease-holder.ts`); when the guard
 * fails, the row it returns says why.
 */
import { LEASE_MS, LIMITS, type OperationResponse, TERMINAL_STATUSES } from '../contract/index.js';
import type { Database } from '../db/database.js';
import { IdemError } from '../errors.js';
import { canonicalJson } from './json-value.js';
import { leaseOf, toOperation } from './operation.js';
import * as sqlHolder from './sql/lease-holder.js';
import type { OperationRow } from './sql/row.js';

export interface HolderTarget {
  scope: string;
  key: string;
  leaseId: string;
  actor: string;
}

function leaseLost(row: OperationRow): IdemError {
  return new IdemError('LEASE_LOST', 'this lease is no longer current (expired or superseded)', {
    operation: toOperation(row),
  });
}

function answer(row: OperationRow, withLease: boolean): OperationResponse {
  const res: OperationResponse = { operation: toOperation(row) };
  if (withLease && row.leaseId && row.leaseExpiresAt) res.lease = leaseOf(row);
  return res;
}

/** Marks the side effect as started. Repeating it on a live lease is harmless. */
export async function dispatch(db: Database, t: HolderTarget): Promise<OperationResponse> {
  const r = await sqlHolder.runDispatch(db, t);
  if (!r.changed && !r.alreadyDone) throw leaseLost(r.row);
  return answer(r.row, true);
}

export async function heartbeat(
  db: Database,
  t: HolderTarget & { leaseMs?: number },
): Promise<OperationResponse> {
  const leaseMs = t.leaseMs ?? LEASE_MS.default;
  const r = await sqlHolder.runHeartbeat(db, {
    scope: t.scope,
    key: t.key,
    leaseId: t.leaseId,
    actor: t.actor,
    leaseMs,
  });
  if (!r.changed) throw leaseLost(r.row);
  return answer(r.row, true);
}

export async function complete(
  db: Database,
  t: HolderTarget & { status: 'succeeded' | 'failed'; result: unknown },
): Promise<OperationResponse> {
  const result = t.result === undefined ? null : canonicalJson(t.result, 'result', LIMITS.resultBytes);
  const r = await sqlHolder.runComplete(db, {
    scope: t.scope,
    key: t.key,
    leaseId: t.leaseId,
    actor: t.actor,
    status: t.status,
    result,
  });
  if (r.changed) return answer(r.row, false);
  if (r.row.leaseId !== t.leaseId) throw leaseLost(r.row);
  if (r.row.status === 'succeeded' || r.row.status === 'failed') {
    if (r.alreadyDone) return answer(r.row, false); // the same outcome again: nothing to do
    throw new IdemError('RESULT_MISMATCH', `the operation already ${r.row.status} with another result`, {
      operation: toOperation(r.row),
    });
  }
  throw new IdemError('INVALID_STATE', `cannot complete an operation that is ${r.row.status}`, {
    operation: toOperation(r.row),
  });
}

/** The effect did not happen: back to `ready`. Repeating it is harmless. */
/** Why a holder ended its lease (release, unknown), kept in the event's detail. */
export type EndTarget = HolderTarget & { reason?: string };

export async function release(db: Database, t: EndTarget): Promise<OperationResponse> {
  const r = await sqlHolder.runRelease(db, t);
  if (r.changed) return answer(r.row, false);
  if (r.row.leaseId !== t.leaseId) throw leaseLost(r.row);
  if (r.row.status === 'ready') return answer(r.row, false);
  throw new IdemError('INVALID_STATE', `cannot release an operation that is ${r.row.status}`, {
    operation: toOperation(r.row),
  });
}

/** The holder cannot tell whether the effect happened. Repeating it is harmless. */
export async function markUnknown(db: Database, t: EndTarget): Promise<OperationResponse> {
  const r = await sqlHolder.runMarkUnknown(db, t);
  if (r.changed) return answer(r.row, false);
  if (r.row.leaseId !== t.leaseId) throw leaseLost(r.row);
  if (r.row.status === 'outcome_unknown') return answer(r.row, false);
  const code =
    TERMINAL_STATUSES.includes(r.row.status) || r.row.status === 'ready' ? 'INVALID_STATE' : 'LEASE_LOST';
  throw new IdemError(code, `cannot mark an operation that is ${r.row.status} as unknown`, {
    operation: toOperation(r.row),
  });
}
