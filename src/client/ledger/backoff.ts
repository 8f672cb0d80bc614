/**
 * Capped exponential backoff with full jitter, shared by the ledger client and
 * the executor. Full jitter (a uniform draw in [0, ceiling]) rather than
 * "equal jitter" because it spreads a herd of retrying clients the most
 * (AWS architecture blog, "Exponential Backoff And Jitter").
 */

/** Sleeps `ms`, or rejects with the signal's reason when it aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** A uniform draw in [0, 1), like `Math.random`. Injected by tests. */
export type Random = () => number;

/** How a retrying caller spaces its attempts. */
export interface BackoffOptions {
  /** Total attempts including the first one. */
  attempts: number;
  /** Ceiling of the first retry's delay, in ms. */
  baseMs: number;
  /** No delay ever exceeds this, in ms. */
  capMs: number;
}

/**
 * The ceiling of the delay before retry number `retry` (1 for the first
 * retry): `min(capMs, baseMs * 2^(retry-1))`.
 */
export function backoffCeiling(retry: number, options: Pick<BackoffOptions, 'baseMs' | 'capMs'>): number {
  // 2 ** 1024 is Infinity, which min() then caps: no overflow for large retry counts.
  return Math.min(options.capMs, options.baseMs * 2 ** Math.max(0, retry - 1));
}

/**
 * The delay before retry number `retry`: a full-jitter draw under the ceiling.
 * A server-given `floorMs` (Retry-After) raises it, still within `capMs`.
 */
export function backoffDelay(
  retry: number,
  options: Pick<BackoffOptions, 'baseMs' | 'capMs'>,
  random: Random,
  floorMs = 0,
): number {
  const jittered = Math.floor(random() * backoffCeiling(retry, options));
  return Math.min(options.capMs, Math.max(jittered, floorMs));
}

/** `setTimeout` as a promise that an `AbortSignal` can cut short. */
export const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
