/**
 * The exact text the model reads about a call, by what the call came to.
 * Runtimes may match on the exported first words.
 */
import type { Effect } from '../../contract/index.js';
import type { CallError } from './call-record.js';

/** The first words of every failure known not to have run. */
export const DID_NOT_RUN = 'the tool did not run, so it is safe to call again';

/**
 * The first words of every `outcome_unknown` message, except a call still
 * running at another worker ({@link IN_PROGRESS_TEXT}).
 */
export const OUTCOME_UNKNOWN_TEXT =
  'the outcome of this call is unknown: its effect may or may not have happened. ' +
  'Do not repeat this call until it is reconciled; the real outcome will be reported to you';

/**
 * The first words of an `outcome_unknown` record with code
 * `OPERATION_IN_PROGRESS`: another worker still runs the call and nothing will
 * report its end, so the runtime has to execute the same call again later.
 */
export const IN_PROGRESS_TEXT =
  'this call is still running elsewhere (another worker holds it), so its outcome is not known yet. ' +
  'Do not make this call another way; execute the same call again later (same call id, same arguments) to get its outcome';

/** Model text for a call another worker is still running. */
export function inProgressMessage(): string {
  return `${IN_PROGRESS_TEXT}.`;
}

/**
 * Model text for a call refused now (out of budget, time or the ledger's
 * reach) that may have run before: it never says "did not run".
 */
export function notRunNowMessage(reason: string): string {
  return (
    `the tool was not run now (${reason}), but an earlier attempt of this call may have taken effect. ` +
    'Do not call it again until you know; ask the user how to proceed.'
  );
}

/** Model text for a failure known not to have run. */
export function didNotRunMessage(reason: string): string {
  return `${DID_NOT_RUN}. ${reason}`;
}

/** Model text for an `outcome_unknown` call. */
export function outcomeUnknownMessage(reason?: string): string {
  return reason ? `${OUTCOME_UNKNOWN_TEXT}. (${reason})` : `${OUTCOME_UNKNOWN_TEXT}.`;
}

/** Model text for a call waiting for a person. */
export function pendingApprovalMessage(deadline?: string): string {
  const until = deadline ? ` (until ${deadline})` : '';
  return `this call is waiting for a person's approval${until} and has not run yet. Do not call it again: its result will be reported to you.`;
}

/** Model text for a call a person rejected (or whose approval expired). */
export function rejectedMessage(note?: string | null): string {
  const why = note ? ` The note says: ${note}.` : '';
  return `a person rejected this call (or its approval expired), so the tool did not run.${why} Do not call it again unless the user asks for it.`;
}

/** Model text for a tool that returned a value. */
export function succeededMessage(output: unknown): string {
  if (typeof output === 'string') return output;
  return JSON.stringify(output === undefined ? null : output);
}

/** Model text for a failure of a tool that ran (or may have run). */
export function failedMessage(error: CallError, effect: Effect, attempts: number): string {
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  const base = `the tool failed${tries} (${error.code}): ${error.message}.`;
  switch (error.nextAction) {
    case 'fix_arguments':
      return `${base} Change the arguments before calling it again.`;
    case 'ask_user':
      return `${base} Repeating the same call will fail the same way; ask the user how to proceed.`;
    case 'check_state':
      return `${base} An attempt may have taken effect: check the current state before calling it again.`;
    case 'retry_later':
      return `${base} It had no effect; calling it again later may succeed.`;
    default:
      return effect === 'read' ? `${base} Reading again later is safe.` : base;
  }
}
