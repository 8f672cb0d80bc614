/**
 * A session out of budget may run nothing more, but a replay costs no
 * attempt: the ledger is asked about the call before the executor refuses,
 * so a call that already ran is answered from the ledger, and "did not run"
 * is said only when the ledger shows the call never started. Budgets live in
 * one executor's memory: a refusal that claimed "did not run" for a call
 * another replica finished would invite a second effect.
 */
import type { Operation } from '../../contract/index.js';
import type { LedgerClient } from '../ledger/ledger-client.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import { adoptRecorded } from './begin-call.js';
import type { Outcome } from './call-record.js';
import type { CallState } from './call-state.js';
import { notRun, notRunNow, outcomeFromOperation } from './outcome.js';

/** What the model is told about `c` when the session's budget is spent (`reason` says how). */
export async function outOfBudget(
  ledger: LedgerClient,
  c: CallState,
  hash: string,
  reason: string,
): Promise<Outcome> {
  let op: Operation;
  try {
    op = await ledger.get(c.scope, c.key, { signal: c.signal });
  } catch (err) {
    if (isLedgerError(err, 'NOT_FOUND')) return notRun('BUDGET_EXHAUSTED', reason, 'ask_user');
    c.logger.warn({ code: isLedgerError(err) ? err.code : undefined }, 'ledger get failed');
    return notRunNow('BUDGET_EXHAUSTED', `${reason}; the ledger could not tell whether this call ran before`);
  }
  if (op.fingerprint !== hash) {
    return notRun('KEY_REUSED', 'this tool call id was already used with other arguments', 'use_new_call_id');
  }
  adoptRecorded(c, op);
  // `ready`: released, approved or lapsed before dispatch: the effect never happened.
  if (op.status === 'ready') return notRun('BUDGET_EXHAUSTED', reason, 'ask_user');
  return outcomeFromOperation(op, c.effect);
}
