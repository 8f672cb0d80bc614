/**
 * The classification table of the contract: what the executor does with a
 * failed attempt, by what failed and by the tool's effect class.
 *
 * | what happened                               | read / idempotent_write | the other writes    |
 * | ------------------------------------------- | ----------------------- | ------------------- |
 * | ToolError INVALID_ARGUMENT, PERMISSION_...  | complete failed         | complete failed     |
 * | ToolError notApplied                        | retry if retryable,     | release (did not    |
 * |                                             | else release            | run)                |
 * | ToolError retryable (RATE_LIMITED, ...)     | retry                   | unknown             |
 * | ToolError retryable: false, other code      | complete failed         | unknown             |
 * | timeout, abort, any other exception         | retry                   | unknown             |
 * | cancelled by the caller                     | complete failed         | unknown             |
 */
import type { Effect } from '../../contract/index.js';
import type { CallError, NextAction } from './call-record.js';
import { scrubMessage } from './canonical.js';
import { isRepeatable } from './tool.js';
import { TERMINAL_CODES, ToolError } from './tool-error.js';

/** Why an attempt did not return a value. */
export type AttemptFailure =
  | { kind: 'thrown'; error: unknown }
  | { kind: 'timeout'; timeoutMs: number }
  | { kind: 'cancelled' }
  | { kind: 'lease_lost' };

/** What to do about a failed attempt. */
export type Decision =
  /** Run again within the same lease (reads and idempotent writes only). */
  | { action: 'retry'; error: CallError; notApplied: boolean; retryAfterMs: number | undefined }
  /** `complete` the operation as failed: terminal, replayed to the same key. */
  | { action: 'complete_failed'; error: CallError }
  /** `release`: the effect did not happen, the operation is `ready` again. */
  | { action: 'release'; error: CallError }
  /** `unknown`: it may have happened; nothing runs it again until reconciled. */
  | { action: 'unknown'; error: CallError };

const NEXT_BY_CODE: Record<string, NextAction> = {
  INVALID_ARGUMENT: 'fix_arguments',
  PERMISSION_DENIED: 'ask_user',
  NOT_FOUND: 'ask_user',
  CONFLICT: 'ask_user',
};

/** The error the model is given for a failure: scrubbed, never a stack. */
export function describeFailure(failure: AttemptFailure): CallError {
  switch (failure.kind) {
    case 'timeout':
      return {
        code: 'TIMEOUT',
        message: `the tool did not answer within ${failure.timeoutMs} ms`,
        retryable: true,
      };
    case 'cancelled':
      return { code: 'CANCELLED', message: 'the call was cancelled', retryable: true };
    case 'lease_lost':
      return { code: 'LEASE_LOST', message: 'another worker took the call over', retryable: false };
    case 'thrown': {
      const err = failure.error;
      if (err instanceof ToolError) {
        return { code: err.code, message: scrubMessage(err.message), retryable: err.retryable };
      }
      // Exceptions the tool did not mean for the model may quote SQL, paths or
      // credentials: the model gets only their class; the log gets the rest.
      const name = err instanceof Error ? err.name : typeof err;
      return {
        code: 'TOOL_EXCEPTION',
        message: `the tool raised an unexpected error (${name})`,
        retryable: true,
      };
    }
  }
}

/** Applies the classification table to one failed attempt. */
export function classify(failure: AttemptFailure, effect: Effect): Decision {
  const repeatable = isRepeatable(effect);
  const error = describeFailure(failure);
  if (failure.kind === 'cancelled' || failure.kind === 'lease_lost') {
    return repeatable ? { action: 'complete_failed', error } : { action: 'unknown', error };
  }
  if (failure.kind === 'thrown' && failure.error instanceof ToolError) {
    const err = failure.error;
    if (TERMINAL_CODES.includes(err.code)) {
      return {
        action: 'complete_failed',
        error: { ...error, retryable: false, nextAction: NEXT_BY_CODE[err.code] },
      };
    }
    if (err.notApplied) {
      if (repeatable && err.retryable) {
        return { action: 'retry', error, notApplied: true, retryAfterMs: err.retryAfterMs };
      }
      return { action: 'release', error: { ...error, retryable: true, nextAction: 'call_again' } };
    }
    if (!repeatable) return { action: 'unknown', error: { ...error, nextAction: 'wait_for_reconciliation' } };
    if (!err.retryable) return { action: 'complete_failed', error };
    return { action: 'retry', error, notApplied: false, retryAfterMs: err.retryAfterMs };
  }
  if (!repeatable) return { action: 'unknown', error: { ...error, nextAction: 'wait_for_reconciliation' } };
  return { action: 'retry', error, notApplied: false, retryAfterMs: undefined };
}
