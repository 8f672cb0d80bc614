/**
 * Operator calls: approve, reject, resolve. One guarded statement each
 * (`sql/operator.ts`); when the guard fails, the row says why.
 */
import { LIMITS, type OperationResponse } from '../contract/index.js';
import type { Database } from '../db/database.js';
import { IdemError } from '../errors.js';
import { canonicalJson } from './json-value.js';
import { toOperation } from './operation.js';
import * as sqlOperator from './sql/operator.js';
import type { TransitionResult } from './sql/transition.js';

export interface OperatorTarget {
  scope: string;
  key: string;
  actor: string;
}

const invalidState = (r: TransitionResult, what: string) =>
  new IdemError('INVALID_STATE', `cannot ${what} an operation that is ${r.row.status}`, {
    operation: toOperation(r.row),
  });

const jsonOrNull = (v: unknown, field: string, max: number) =>
  v === undefined ? null : canonicalJson(v, field, max);

export async function approve(
  db: Database,
  t: OperatorTarget & { fingerprint?: string; note?: string },
): Promise<OperationResponse> {
  const r = await sqlOperator.runApprove(db, {
    ...t,
    fingerprint: t.fingerprint ?? null,
    note: t.note ?? null,
  });
  if (r.changed) return { operation: toOperation(r.row) };
  if (r.row.status === 'pending_approval') {
    throw new IdemError(
      'FINGERPRINT_MISMATCH',
      'the request you approved is not the one pending under this key',
      {
        operation: toOperation(r.row),
      },
    );
  }
  // Not pending (approved already, rejected, expired): the contract's INVALID_STATE.
  throw invalidState(r, 'approve');
}

export async function reject(
  db: Database,
  t: OperatorTarget & { note?: string; result?: unknown },
): Promise<OperationResponse> {
  // Without a result of the operator's own, a rejection replays as this error object.
  const result =
    t.result === undefined
      ? canonicalJson({ code: 'APPROVAL_REJECTED', note: t.note ?? null }, 'result', LIMITS.resultBytes)
      : canonicalJson(t.result, 'result', LIMITS.resultBytes);
  const r = await sqlOperator.runReject(db, { ...t, note: t.note ?? null, result });
  if (r.changed) return { operation: toOperation(r.row) };
  throw invalidState(r, 'reject');
}

export async function resolve(
  db: Database,
  t: OperatorTarget & {
    status: 'succeeded' | 'failed' | 'ready';
    note: string;
    result?: unknown;
    expectedAttempt?: number;
  },
): Promise<OperationResponse> {
  const result = jsonOrNull(t.result, 'result', LIMITS.resultBytes);
  const r = await sqlOperator.runResolve(db, { ...t, result, expectedAttempt: t.expectedAttempt ?? null });
  if (r.changed) return { operation: toOperation(r.row) };
  if (t.expectedAttempt !== undefined && r.row.attempt !== t.expectedAttempt) {
    throw new IdemError(
      'INVALID_STATE',
      `expectedAttempt is ${t.expectedAttempt} but the operation is at attempt ${r.row.attempt}`,
      { operation: toOperation(r.row) },
    );
  }
  throw invalidState(r, 'resolve');
}
