/**
 * The acquired phase of a call: dispatch, run (with retries for reads and
 * idempotent writes), classify, and write the outcome to the ledger.
 *
 * Retries stay inside the lease the call acquired. `release` would tell the
 * ledger "the effect did not happen", which is false after a timeout of an
 * idempotent write; a fresh `begin` would bump the fencing number and open a
 * window for another worker to take the call. So between attempts the lease
 * is renewed with `heartbeat`, and a worker that dies mid-retry leaves a
 * dispatched, expired lease that rule A hands to the next `begin` (re-run for
 * these effect classes).
 */
import type { Logger } from 'pino';
import type { Effect } from '../../contract/index.js';
import { backoffDelay, type Random, type Sleep } from '../ledger/backoff.js';
import type { LedgerClient } from '../ledger/ledger-client.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import type { CallApproval, CallError } from './call-record.js';
import { failedMessage, succeededMessage } from './call-record.js';
import { classify, type Decision } from './classify.js';
import { notRun, notRunNow, type Outcome, outcomeFromOperation, unknownOutcome } from './outcome.js';
import { runAttempt } from './run-attempt.js';
import type { SessionBudget } from './session-budget.js';
import {
  DEFAULT_TOOL_RETRY,
  DEFAULT_TOOL_TIMEOUT_MS,
  isRepeatable,
  type Json,
  type ToolDefinition,
} from './tool.js';

/** One proposed call as the runtime hands it over. */
export interface ToolCall {
  sessionId: string;
  turnId: string;
  /** The model protocol's id of this request. */
  toolCallId: string;
  /** The tool's name. */
  name: string;
  /** A JSON string or a parsed value. */
  arguments?: unknown;
}

/** What the executor knows about a call in flight. */
export interface CallState {
  call: ToolCall;
  key: string;
  scope: string;
  tool: ToolDefinition;
  args: Json;
  effect: Effect;
  requiresApproval: boolean;
  approval: CallApproval;
  startedMs: number;
  deadline: number;
  attempts: number;
  /** The lease was taken over from a worker that dispatched and lapsed: an earlier attempt may have run. */
  recovered: boolean;
  signal: AbortSignal | undefined;
  logger: Logger;
  /** An exception a tool raised, kept for the log line only. */
  cause?: unknown;
}

/** What the runner needs from the executor. */
export interface RunnerDeps {
  ledger: LedgerClient;
  budget: SessionBudget;
  leaseMs: number;
  sleep: Sleep;
  random: Random;
  now: () => number;
}

/**
 * Runs an acquired call to its outcome. Answers `begin_again` when the lease
 * lapsed before dispatch (nothing ran; the next begin re-acquires).
 */
export async function runAcquired(
  d: RunnerDeps,
  c: CallState,
  leaseId: string,
): Promise<Outcome | 'begin_again'> {
  const { ledger } = d;
  const retry = { ...DEFAULT_TOOL_RETRY, ...c.tool.policy.retry };
  const maxAttempts = isRepeatable(c.effect) ? Math.max(1, retry.attempts) : 1;
  const session = c.call.sessionId;
  const quietly = async (what: string, write: () => Promise<unknown>) => {
    try {
      await write();
    } catch (err) {
      // The outcome stands; rule A settles the operation once the lease lapses.
      c.logger.warn({ err: describe(err), key: c.key }, `ledger ${what} failed`);
    }
  };
  const heartbeat = async () => {
    try {
      await ledger.heartbeat(c.scope, c.key, leaseId, d.leaseMs);
      return true;
    } catch (err) {
      return !isLedgerError(err, 'LEASE_LOST');
    }
  };
  const fromLedger = async (): Promise<Outcome> => {
    try {
      return outcomeFromOperation(await ledger.get(c.scope, c.key), c.effect);
    } catch {
      return unknownOutcome('LEASE_LOST', 'another worker took the call over');
    }
  };

  let last: Decision | undefined;
  let allNotApplied = true;
  let stopped: CallError | undefined;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    stopped = stopReason(d, c, session);
    if (stopped) break;
    if (attempt === 1) {
      try {
        await ledger.dispatch(c.scope, c.key, leaseId, { signal: c.signal });
      } catch (err) {
        if (isLedgerError(err, 'LEASE_LOST')) return 'begin_again';
        await quietly('release', () => ledger.release(c.scope, c.key, leaseId));
        if (c.signal?.aborted) return notRun('CANCELLED', 'the call was cancelled before it ran');
        return notRun('LEDGER_UNAVAILABLE', 'the call could not be recorded, so it was not run');
      }
    } else if (!(await heartbeat())) {
      return fromLedger();
    }
    c.attempts++;
    const timeoutMs = Math.max(
      1,
      Math.min(c.tool.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS, c.deadline - d.now(), d.budget.wallLeft(session)),
    );
    const result = await runAttempt({
      timeoutMs,
      signal: c.signal,
      heartbeatEveryMs: Math.floor(d.leaseMs / 3),
      heartbeat,
      start: (signal) =>
        c.tool.run(c.args, {
          idempotencyKey: c.key,
          signal,
          attempt,
          sessionId: c.call.sessionId,
          turnId: c.call.turnId,
          callId: c.call.toolCallId,
          scope: c.scope,
          deadline: c.deadline,
          logger: c.logger,
        }),
    });
    if (result.ok) {
      const output = result.value === undefined ? null : (result.value as Json);
      await quietly('complete', () =>
        ledger.complete(c.scope, c.key, { leaseId, status: 'succeeded', result: output }),
      );
      return { status: 'succeeded', output, modelMessage: succeededMessage(output) };
    }
    if (result.failure.kind === 'lease_lost') return fromLedger();
    if (result.failure.kind === 'thrown') c.cause = result.failure.error;
    last = classify(result.failure, c.effect);
    if (last.action !== 'retry') return settle(last);
    if (!last.notApplied) allNotApplied = false;
    if (attempt === maxAttempts) break;
    const delay = backoffDelay(attempt, retry, d.random, last.retryAfterMs);
    if (d.now() + delay >= c.deadline) {
      stopped = {
        code: 'DEADLINE_EXCEEDED',
        message: 'no time was left for another attempt',
        retryable: true,
      };
      break;
    }
    try {
      await d.sleep(delay, c.signal);
    } catch {
      stopped = { code: 'CANCELLED', message: 'the call was cancelled', retryable: true };
      break;
    }
  }

  if (!last) {
    // Stopped before the first attempt: the tool never ran.
    await quietly('release', () => ledger.release(c.scope, c.key, leaseId));
    const why = stopped ?? { code: 'INTERNAL', message: 'no attempt was made', retryable: true };
    if (c.recovered) return notRunNow(why.code, why.message);
    return notRun(why.code, why.message, why.code === 'BUDGET_EXHAUSTED' ? 'ask_user' : 'call_again');
  }
  // Retries ran out (or were stopped): fail with the last error, and say so.
  const lastError = last.error;
  const error: CallError = stopped
    ? {
        ...stopped,
        message: `${stopped.message}; the last attempt failed with ${lastError.code}: ${lastError.message}`,
      }
    : { ...lastError };
  if (allNotApplied) return settle({ action: 'release', error });
  error.nextAction = c.effect === 'read' ? 'retry_later' : 'check_state';
  return settle({ action: 'complete_failed', error });

  async function settle(decision: Decision): Promise<Outcome> {
    const { error } = decision;
    switch (decision.action) {
      case 'release':
        await quietly('release', () => ledger.release(c.scope, c.key, leaseId));
        return notRun(
          error.code,
          error.message,
          error.code === 'BUDGET_EXHAUSTED' ? 'ask_user' : 'call_again',
        );
      case 'unknown':
        await quietly('unknown', () => ledger.unknown(c.scope, c.key, leaseId));
        return unknownOutcome(error.code, error.message);
      default:
        await quietly('complete', () =>
          ledger.complete(c.scope, c.key, { leaseId, status: 'failed', result: error as unknown as Json }),
        );
        return { status: 'failed', error, modelMessage: failedMessage(error, c.effect, c.attempts) };
    }
  }
}

/** Why no further attempt may start: cancelled, out of time, or out of budget. */
function stopReason(d: RunnerDeps, c: CallState, session: string): CallError | undefined {
  if (c.signal?.aborted) return { code: 'CANCELLED', message: 'the call was cancelled', retryable: true };
  if (d.now() >= c.deadline) {
    return { code: 'DEADLINE_EXCEEDED', message: 'the call ran out of time', retryable: true };
  }
  const exhausted = d.budget.exhausted(session);
  if (exhausted !== undefined || !d.budget.takeAttempt(session)) {
    return {
      code: 'BUDGET_EXHAUSTED',
      message: exhausted ?? 'the session budget is exhausted',
      retryable: false,
    };
  }
  return undefined;
}

function describe(err: unknown): { name: string; code?: string } {
  if (isLedgerError(err)) return { name: err.name, code: err.code };
  return { name: err instanceof Error ? err.name : typeof err };
}
