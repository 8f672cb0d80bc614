/**
 * What the reconciler tells a session: a call record rebuilt from the ledger,
 * and a short note written as coming from the application, not the user.
 */
import type { Operation } from '../../contract/index.js';
import type { CallRecord } from '../executor/call-record.js';
import { timing } from '../executor/call-record.js';
import { outcomeFromOperation } from '../executor/outcome.js';

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
  const rebuilt = sessionId && turnId && toolCallId ? `${sessionId}/${turnId}/${toolCallId}` : undefined;
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
  const outcome = outcomeFromOperation(op);
  return {
    callId: call.toolCallId ?? op.key,
    key: op.key,
    scope: op.scope,
    tool: call.tool,
    effect: op.effect,
    requiresApproval: op.metadata.requiresApproval === true,
    status: outcome.status,
    ...(outcome.status === 'succeeded' ? { output: outcome.output } : {}),
    ...(outcome.error ? { error: outcome.error } : {}),
    attempts: 0,
    approval: op.approval,
    inputHash: op.fingerprint,
    ...timing(Date.parse(op.createdAt), now),
    modelMessage: outcome.modelMessage,
  };
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
