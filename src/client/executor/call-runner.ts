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
import { backoffDelay } from '../ledger/backoff.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import type { CallError, Outcome } from './call-record.js';
import type { CallState, RunnerDeps } from './call-state.js';
import { classify, type Decision } from './classify.js';
import { HeldLease, nextAfter } from './held-lease.js';
import { notRun, notRunNow } from './outcome.js';
import { type AttemptResult, runAttempt } from './run-attempt.js';
import { DEFAULT_TOOL_RETRY, DEFAULT_TOOL_TIMEOUT_MS, isRepeatable } from './tool.js';

type Retry = { attempts: number; baseMs: number; capMs: number };

/** What the attempts came to when none of them settled the call. */
interface Tally {
  /** The decision about the last failed attempt; undefined when no attempt ran. */
  last: Decision | undefined;
  /** Every failed attempt said it had no effect. */
  allNotApplied: boolean;
  /** Why no further attempt started, when something stopped them. */
  stopped: CallError | undefined;
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
  const lease = new HeldLease(d, c, leaseId);
  const retry: Retry = { ...DEFAULT_TOOL_RETRY, ...c.tool.policy.retry };
  const maxAttempts = isRepeatable(c.effect) ? Math.max(1, retry.attempts) : 1;
  const tally: Tally = { last: undefined, allNotApplied: true, stopped: undefined };
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    tally.stopped = stopReason(d, c);
    if (tally.stopped) break;
    const blocked = attempt === 1 ? await dispatch(d, c, lease) : await keepLease(lease);
    if (blocked) return blocked;
    const result = await runOnce(d, c, lease, attempt);
    if (result.ok) return lease.succeed(result.value);
    if (result.failure.kind === 'lease_lost') return lease.fromLedger();
    if (result.failure.kind === 'thrown') c.cause = result.failure.error;
    const decision = classify(result.failure, c.effect);
    if (decision.action !== 'retry') return lease.settle(decision);
    tally.last = decision;
    if (!decision.notApplied) tally.allNotApplied = false;
    if (attempt === maxAttempts) break;
    tally.stopped = await backOff(d, c, attempt, retry, decision.retryAfterMs);
    if (tally.stopped) break;
  }
  return afterAttempts(c, lease, tally);
}

/** Marks the effect as started, right before the first attempt; an outcome when it may not start. */
async function dispatch(
  d: RunnerDeps,
  c: CallState,
  lease: HeldLease,
): Promise<Outcome | 'begin_again' | undefined> {
  try {
    await d.ledger.dispatch(c.scope, c.key, lease.id, { signal: c.signal });
    return undefined;
  } catch (err) {
    if (isLedgerError(err, 'LEASE_LOST')) return 'begin_again';
    await lease.release();
    if (c.signal?.aborted) return notRun('CANCELLED', 'the call was cancelled before it ran');
    return notRun('LEDGER_UNAVAILABLE', 'the call could not be recorded, so it was not run');
  }
}

/** Renews the lease before a retry; what the ledger says when it was lost. */
async function keepLease(lease: HeldLease): Promise<Outcome | undefined> {
  return (await lease.heartbeat()) ? undefined : lease.fromLedger();
}

/** One attempt of the tool, timed out by the tool, the call deadline and the session's time. */
function runOnce(d: RunnerDeps, c: CallState, lease: HeldLease, attempt: number): Promise<AttemptResult> {
  c.attempts++;
  const { sessionId, turnId, toolCallId } = c.call;
  const timeoutMs = Math.max(
    1,
    Math.min(c.tool.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS, c.deadline - d.now(), d.budget.wallLeft(sessionId)),
  );
  return runAttempt({
    timeoutMs,
    signal: c.signal,
    heartbeatEveryMs: Math.floor(d.leaseMs / 3),
    heartbeat: () => lease.heartbeat(),
    start: (signal) =>
      c.tool.run(c.args, {
        idempotencyKey: c.key,
        signal,
        attempt,
        sessionId,
        turnId,
        callId: toolCallId,
        scope: c.scope,
        deadline: c.deadline,
        logger: c.logger,
      }),
  });
}

/** Waits before the next attempt; why not, when the wait would pass the deadline or was cancelled. */
async function backOff(
  d: RunnerDeps,
  c: CallState,
  attempt: number,
  retry: Retry,
  retryAfterMs: number | undefined,
): Promise<CallError | undefined> {
  const delay = backoffDelay(attempt, retry, d.random, retryAfterMs);
  if (d.now() + delay >= c.deadline) {
    return { code: 'DEADLINE_EXCEEDED', message: 'no time was left for another attempt', retryable: true };
  }
  try {
    await d.sleep(delay, c.signal);
    return undefined;
  } catch {
    return { code: 'CANCELLED', message: 'the call was cancelled', retryable: true };
  }
}

/** The end when retries ran out or were stopped: fail with the last error, and say so. */
async function afterAttempts(c: CallState, lease: HeldLease, tally: Tally): Promise<Outcome> {
  const { last, stopped } = tally;
  if (!last) {
    // Stopped before the first attempt: the tool never ran here.
    await lease.release();
    const why = stopped ?? { code: 'INTERNAL', message: 'no attempt was made', retryable: true };
    if (c.recovered) return notRunNow(why.code, why.message);
    return notRun(why.code, why.message, nextAfter(why));
  }
  const lastError = last.error;
  const error: CallError = stopped
    ? {
        ...stopped,
        message: `${stopped.message}; the last attempt failed with ${lastError.code}: ${lastError.message}`,
      }
    : { ...lastError };
  if (tally.allNotApplied) return lease.settle({ action: 'release', error });
  error.nextAction = c.effect === 'read' ? 'retry_later' : 'check_state';
  return lease.settle({ action: 'complete_failed', error });
}

/** Why no further attempt may start: cancelled, out of time, or out of budget. */
function stopReason(d: RunnerDeps, c: CallState): CallError | undefined {
  const session = c.call.sessionId;
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
