/**
 * The call record: what one proposed tool call came to. Built here only
 * (`buildRecord`), for the executor and for the reconciler's reports alike;
 * the texts the model reads are in model-text.ts.
 */
import type { Static } from 'typebox';
import type { ApprovalView, Effect } from '../../contract/index.js';

/** How a call ended, as the model and the runtime see it. */
export type CallStatus = 'succeeded' | 'failed' | 'rejected' | 'outcome_unknown' | 'pending_approval';

/** Hints for the runtime (and the model) about what to do next. */
export type NextAction =
  | 'call_again'
  | 'fix_arguments'
  | 'retry_later'
  | 'check_state'
  | 'ask_user'
  | 'wait_for_approval'
  | 'wait_for_reconciliation'
  | 'use_new_call_id';

/** A failure as given to the model: no stack, no SQL, no secrets. */
export interface CallError {
  code: string;
  message: string;
  /** Whether calling again may succeed. */
  retryable: boolean;
  nextAction?: NextAction;
}

/** The approval state of the call in the ledger, or null when none was asked. */
export type CallApproval = Static<typeof ApprovalView> | null;

/** One tool call, as recorded. */
export interface CallRecord {
  /** The model protocol's id of the request this answers (`toolCallId`). */
  callId: string;
  /** The operation key: `${sessionId}/${turnId}/${toolCallId}`. */
  key: string;
  scope: string;
  tool: string;
  /** The effect class in force when the model asked. */
  effect: Effect;
  /** The approval rule in force when the model asked. */
  requiresApproval: boolean;
  status: CallStatus;
  output?: unknown;
  error?: CallError;
  /** How many times this call ran the tool in this executor (0: it never ran here). */
  attempts: number;
  approval: CallApproval;
  /** sha256 of the canonical arguments: the only trace of them in logs. */
  inputHash: string;
  startedAt: string;
  finishedAt: string;
  latencyMs: number;
  /** The text the model reads. */
  modelMessage: string;
}

/** The ids that name a call: who asked, in which turn, which request of the model. */
export interface CallIds {
  sessionId: string;
  turnId: string;
  toolCallId: string;
}

/**
 * The operation key of a call, `${sessionId}/${turnId}/${toolCallId}`: the
 * same on every attempt, handed to the tool as `ctx.idempotencyKey`, and
 * rebuilt from these ids by the reconciler.
 */
export function callKey(ids: CallIds): string {
  return `${ids.sessionId}/${ids.turnId}/${ids.toolCallId}`;
}

/** The outcome part of a call record. */
export interface Outcome {
  status: CallStatus;
  output?: unknown;
  error?: CallError;
  modelMessage: string;
}

/** Everything a record is made of besides its outcome. */
export interface RecordParts {
  callId: string;
  key: string;
  scope: string;
  tool: string;
  effect: Effect;
  requiresApproval: boolean;
  attempts: number;
  approval: CallApproval;
  inputHash: string;
  startedMs: number;
  finishedMs: number;
}

/** The one place a {@link CallRecord} is put together: `output` only on success. */
export function buildRecord(parts: RecordParts, outcome: Outcome): CallRecord {
  const { startedMs, finishedMs, ...identity } = parts;
  return {
    ...identity,
    status: outcome.status,
    ...(outcome.status === 'succeeded' ? { output: outcome.output } : {}),
    ...(outcome.error ? { error: outcome.error } : {}),
    startedAt: new Date(startedMs).toISOString(),
    finishedAt: new Date(finishedMs).toISOString(),
    latencyMs: Math.max(0, finishedMs - startedMs),
    modelMessage: outcome.modelMessage,
  };
}
