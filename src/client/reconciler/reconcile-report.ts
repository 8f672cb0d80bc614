/**
 * What the reconciler writes and tells: the resolve a finding leads to, a
 * call record rebuilt from the ledger, and a short note written as coming
 * from the application, not the user.
 */
import type { Operation, ResolveBody } from '../../contract/index.js';
import { buildRecord, type CallRecord, callKey } from '../executor/call-record.js';
import { outcomeFromOperation } from '../executor/outcome.js';
import type { Finding } from './report-marker.js';

/** The identity of a call, rebuilt from the operation's metadata. */
export interface RebuiltCall {
  key: string;
  tool: string;
  sessionId: string | undefined;
  turnId: string | undefined;
  toolCallId: string | undefined;
  /** The arguments: the stored request, or the redacted copy in the metadata. */
  args: unknown;
}

/** Rebuilds the key and arguments of the call behind `op`. */
export function rebuildCall(op: Operation): RebuiltCall {
  const m = op.metadata;
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const sessionId = str(m.sessionId);
  const turnId = str(m.turnId);
  const toolCallId = str(m.toolCallId);
  // Every attempt of the call handed this key to the service it wrote to.
  const rebuilt = sessionId && turnId && toolCallId ? callKey({ sessionId, turnId, toolCallId }) : undefined;
  return {
    key: rebuilt === op.key ? rebuilt : op.key,
    tool: str(m.tool) ?? 'unknown_tool',
    sessionId,
    turnId,
    toolCallId,
    args: op.request ?? m.request ?? null,
  };
}

/** The call record of a resolved operation, as the session should now see it. */
export function recordFromOperation(op: Operation, now: number): CallRecord {
  const call = rebuildCall(op);
  return buildRecord(
    {
      callId: call.toolCallId ?? op.key,
      key: op.key,
      scope: op.scope,
      tool: call.tool,
      effect: op.effect,
      requiresApproval: op.metadata.requiresApproval === true,
      attempts: 0,
      approval: op.approval,
      inputHash: op.fingerprint,
      startedMs: Date.parse(op.createdAt),
      finishedMs: now,
    },
    outcomeFromOperation(op),
  );
}

/**
 * The note for the session, e.g. "Note from the order system: the call
 * cancel_order went through. (tool call session-42/turn-3/call-7)". `text`
 * from a probe replaces the middle part.
 */
export function reportText(op: Operation, source: string, text?: string): string {
  const call = rebuildCall(op);
  const what =
    text ??
    (op.status === 'succeeded'
      ? `the call ${call.tool} went through.`
      : op.status === 'ready'
        ? `the call ${call.tool} did not go through; it is safe to call again.`
        : `the call ${call.tool} did not go through.`);
  return `Note from ${source}: ${what} (tool call ${op.key})`;
}

/**
 * The compare-and-set resolve a finding leads to: applied, `succeeded` with
 * the evidence; not applied, `failed` with a stored "did not happen" (the
 * model is told it may call again) or `ready` so the same call may run.
 */
export function resolveBody(found: Finding, attempt: number, notApplied: 'failed' | 'ready'): ResolveBody {
  if (found.status === 'applied') {
    return {
      status: 'succeeded',
      note: 'reconciled: the effect happened',
      expectedAttempt: attempt,
      result: found.evidence ?? null,
    };
  }
  const status = found.then ?? notApplied;
  const note = 'reconciled: the effect did not happen';
  if (status === 'ready') return { status, note, expectedAttempt: attempt };
  const result = {
    code: 'NOT_APPLIED',
    message: 'the effect did not happen (found by reconciliation)',
    retryable: true,
    nextAction: 'call_again',
  };
  return { status, note, expectedAttempt: attempt, result };
}
