/**
 * One attempt of a tool: run it with an `AbortSignal`, stop waiting at its
 * timeout, and keep the lease alive while it runs.
 *
 * Cancellation is cooperative: a tool that ignores the signal keeps running
 * after the executor has stopped waiting for it (the "timed-out attempt keeps
 * running" case of the agent drills, docs/drills.md). Only the idempotency key it handed to its
 * service makes that harmless.
 */
import type { AttemptFailure } from './classify.js';

/** What an attempt came to. */
export type AttemptResult = { ok: true; value: unknown } | { ok: false; failure: AttemptFailure };

/** How to run one attempt. */
export interface AttemptSpec {
  /** Starts the tool; receives the attempt's signal. */
  start(signal: AbortSignal): Promise<unknown>;
  timeoutMs: number;
  /** The caller's cancellation. */
  signal?: AbortSignal | undefined;
  /** Heartbeat period (a third of the lease); 0 disables. */
  heartbeatEveryMs: number;
  /** Extends the lease; answers false when the lease is lost. */
  heartbeat(): Promise<boolean>;
}

// Abort reasons the executor gives, told apart from what a tool throws.
class Stop {
  constructor(readonly failure: AttemptFailure) {}
}

/** Runs one attempt; never throws. */
export async function runAttempt(spec: AttemptSpec): Promise<AttemptResult> {
  const controller = new AbortController();
  const stop = (failure: AttemptFailure) => {
    if (!controller.signal.aborted) controller.abort(new Stop(failure));
  };
  const timer = setTimeout(() => stop({ kind: 'timeout', timeoutMs: spec.timeoutMs }), spec.timeoutMs);
  const onCancel = () => stop({ kind: 'cancelled' });
  if (spec.signal?.aborted) onCancel();
  spec.signal?.addEventListener('abort', onCancel, { once: true });
  let beating = false;
  const beat =
    spec.heartbeatEveryMs > 0
      ? setInterval(() => {
          if (beating) return; // one heartbeat in flight at a time
          beating = true;
          spec
            .heartbeat()
            .then(
              (alive) => {
                if (!alive) stop({ kind: 'lease_lost' });
              },
              () => {}, // a failed heartbeat is retried at the next tick
            )
            .finally(() => {
              beating = false;
            });
        }, spec.heartbeatEveryMs)
      : undefined;
  const stopped = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
  });
  // Swallow the late settlement of an abandoned run, so it cannot surface
  // as an unhandled rejection after the executor moved on.
  const running = Promise.resolve().then(() => spec.start(controller.signal));
  running.catch(() => {});
  stopped.catch(() => {});
  try {
    return { ok: true, value: await Promise.race([running, stopped]) };
  } catch (err) {
    // Once the executor stopped the attempt, its reason wins over whatever the
    // tool threw in response (an AbortError, usually).
    const reason: unknown = controller.signal.aborted ? controller.signal.reason : err;
    if (reason instanceof Stop) return { ok: false, failure: reason.failure };
    return { ok: false, failure: { kind: 'thrown', error: err } };
  } finally {
    clearTimeout(timer);
    if (beat) clearInterval(beat);
    spec.signal?.removeEventListener('abort', onCancel);
  }
}
