/**
 * The `begin` of one tool call: the body the executor sends, and what each
 * refusal of the ledger means for the model.
 */
import type { BeginBody, Operation } from '../../contract/index.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import type { Outcome } from './call-record.js';
import type { CallState } from './call-state.js';
import { redactPaths } from './canonical.js';
import { notRun, unknownOutcome } from './outcome.js';

/** Executor settings that go into every begin. */
export interface BeginSettings {
  leaseMs: number;
  owner: string;
  approvalTimeoutMs: number | undefined;
  retentionMs: number | undefined;
}

/** The begin body of a call: canonical arguments (or a fingerprint and a redacted copy), `dispatch: false`. */
export function beginBody(
  c: CallState,
  hash: string,
  traceId: string | undefined,
  s: BeginSettings,
): BeginBody {
  const { call, tool } = c;
  const redact = tool.policy.redact ?? [];
  const metadata: Record<string, unknown> = {
    tool: tool.name,
    sessionId: call.sessionId,
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    preview: preview(c),
    traceId: traceId ?? null,
    requiresApproval: c.requiresApproval,
  };
  const body: BeginBody = {
    key: c.key,
    effect: c.effect,
    leaseMs: s.leaseMs,
    // Acquire now, dispatch right before running: a crash in between is known never to have run.
    dispatch: false,
    owner: s.owner,
    requireApproval: c.requiresApproval,
    metadata,
  };
  if (redact.length > 0) {
    // Secrets stay here: the ledger binds the key to a fingerprint of the full
    // arguments (the same sha256 of RFC 8785 JSON it would compute itself) and
    // keeps only a redacted copy for reconcilers.
    body.fingerprint = hash;
    metadata.request = redactPaths(c.args, redact);
    metadata.redacted = redact;
  } else {
    body.request = c.args;
  }
  if (s.approvalTimeoutMs !== undefined) body.approvalTimeoutMs = s.approvalTimeoutMs;
  if (s.retentionMs !== undefined) body.retentionMs = s.retentionMs;
  return body;
}

function preview(c: CallState): unknown {
  try {
    return c.tool.preview ? c.tool.preview(c.args as never) : null;
  } catch (err) {
    c.logger.warn({ err: err instanceof Error ? err.name : typeof err }, 'tool preview failed');
    return null;
  }
}

/** The effect and approval rule recorded when the call was first begun win over today's policy. */
export function adoptRecorded(c: CallState, op: Pick<Operation, 'effect' | 'approval' | 'metadata'>): void {
  c.effect = op.effect;
  c.approval = op.approval;
  const recorded = op.metadata.requiresApproval;
  if (typeof recorded === 'boolean') c.requiresApproval = recorded;
}

/** What a failed begin (other than OPERATION_IN_PROGRESS) means: in every case the tool did not run here. */
export function beginFailure(c: CallState, err: unknown): Outcome {
  if (c.signal?.aborted) return notRun('CANCELLED', 'the call was cancelled before it ran');
  if (isLedgerError(err, 'KEY_REUSED')) {
    return notRun('KEY_REUSED', 'this tool call id was already used with other arguments', 'use_new_call_id');
  }
  if (isLedgerError(err, 'OUTCOME_UNKNOWN')) {
    if (err.operation) adoptRecorded(c, err.operation);
    return unknownOutcome('OUTCOME_UNKNOWN', 'an earlier attempt of this call may have taken effect');
  }
  if (isLedgerError(err, 'INVALID_ARGUMENT', 'PAYLOAD_TOO_LARGE')) {
    return notRun(err.code, `the ledger refused the call: ${err.message}`, 'fix_arguments');
  }
  if (isLedgerError(err, 'UNAUTHENTICATED', 'SCOPE_FORBIDDEN')) {
    c.logger.error({ code: err.code }, 'the ledger refused the executor');
    return notRun(err.code, 'the executor may not record calls in this scope', 'ask_user');
  }
  c.logger.warn({ code: isLedgerError(err) ? err.code : undefined }, 'ledger begin failed');
  return notRun('LEDGER_UNAVAILABLE', 'the call could not be recorded, so it was not run');
}
