/**
 * How a call stands according to the ledger, turned into the record fields the
 * model reads: used for replays, for calls another worker holds, and by the
 * reconciler after a resolve.
 */
import type { Effect, Operation } from '../../contract/index.js';
import type { CallError, NextAction, Outcome } from './call-record.js';
import { scrubMessage } from './canonical.js';
import {
  didNotRunMessage,
  failedMessage,
  inProgressMessage,
  notRunNowMessage,
  outcomeUnknownMessage,
  pendingApprovalMessage,
  rejectedMessage,
  succeededMessage,
} from './model-text.js';

const NEXT_ACTIONS: readonly string[] = [
  'call_again',
  'fix_arguments',
  'retry_later',
  'check_state',
  'ask_user',
  'wait_for_approval',
  'wait_for_reconciliation',
  'use_new_call_id',
];

/** Reads back a `CallError` the executor stored as a failed result; undefined for anything else. */
export function asCallError(result: unknown): CallError | undefined {
  if (result === null || typeof result !== 'object') return undefined;
  const r = result as Record<string, unknown>;
  if (typeof r.code !== 'string' || typeof r.message !== 'string') return undefined;
  const error: CallError = {
    code: r.code,
    message: scrubMessage(r.message),
    retryable: r.retryable === true,
  };
  if (typeof r.nextAction === 'string' && NEXT_ACTIONS.includes(r.nextAction)) {
    error.nextAction = r.nextAction as NextAction;
  }
  return error;
}

/** A failure known not to have run. */
export function notRun(code: string, message: string, nextAction: NextAction = 'call_again'): Outcome {
  const error: CallError = { code, message, retryable: nextAction === 'call_again', nextAction };
  return { status: 'failed', error, modelMessage: didNotRunMessage(`${code}: ${message}`) };
}

/** Refused now, although an earlier attempt may have run: never "did not run". */
export function notRunNow(code: string, message: string): Outcome {
  const error: CallError = { code, message, retryable: false, nextAction: 'ask_user' };
  return { status: 'failed', error, modelMessage: notRunNowMessage(`${code}: ${message}`) };
}

/**
 * Another worker still runs the call. The outcome is unknown to this caller
 * only for now: it ends on its own, nothing reports it (the reconciler looks
 * at `outcome_unknown` operations only), so the next step is to execute the
 * same call again later.
 */
export function inProgressOutcome(): Outcome {
  return {
    status: 'outcome_unknown',
    error: {
      code: 'OPERATION_IN_PROGRESS',
      message: 'another worker is still running this call',
      retryable: true,
      nextAction: 'retry_later',
    },
    modelMessage: inProgressMessage(),
  };
}

/** An outcome nobody can tell yet. */
export function unknownOutcome(code: string, message: string): Outcome {
  return {
    status: 'outcome_unknown',
    error: { code, message, retryable: false, nextAction: 'wait_for_reconciliation' },
    modelMessage: outcomeUnknownMessage(message),
  };
}

/** The outcome the ledger holds for `op`. */
export function outcomeFromOperation(op: Operation, effect: Effect = op.effect): Outcome {
  switch (op.status) {
    case 'succeeded':
      return { status: 'succeeded', output: op.result, modelMessage: succeededMessage(op.result) };
    case 'failed': {
      const error = asCallError(op.result) ?? {
        code: 'FAILED',
        message: op.resolution
          ? `an operator marked the call as failed: ${scrubMessage(op.resolution.note)}`
          : 'the call failed',
        retryable: false,
      };
      // A stored "did not happen" (a reconciler found no effect) keeps its promise to the model.
      const modelMessage =
        error.nextAction === 'call_again'
          ? didNotRunMessage(`${error.code}: ${error.message}`)
          : failedMessage(error, effect, 1);
      return { status: 'failed', error, modelMessage };
    }
    case 'rejected': {
      const note = op.approval?.note ?? null;
      const expired = op.approval?.state === 'expired';
      const error: CallError = {
        code: expired ? 'APPROVAL_EXPIRED' : 'REJECTED',
        message: note
          ? scrubMessage(note)
          : expired
            ? 'the approval deadline passed'
            : 'a person rejected the call',
        retryable: false,
        nextAction: 'ask_user',
      };
      return { status: 'rejected', error, modelMessage: rejectedMessage(note) };
    }
    case 'pending_approval':
      return {
        status: 'pending_approval',
        error: {
          code: 'APPROVAL_PENDING',
          message: 'waiting for approval',
          retryable: false,
          nextAction: 'wait_for_approval',
        },
        modelMessage: pendingApprovalMessage(op.approval?.deadline),
      };
    case 'ready':
      // Released, approved-but-not-run or re-armed by an operator: nothing ran.
      return notRun('NOT_APPLIED', 'the effect did not happen');
    case 'in_progress':
      return inProgressOutcome();
    case 'outcome_unknown':
      return unknownOutcome('OUTCOME_UNKNOWN', 'the worker running this call stopped before it could tell');
  }
}
