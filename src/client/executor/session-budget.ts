/**
 * Per-session budget: the one place that caps how much trying a session may
 * do, so retries never multiply across model, SDK and executor.
 */

/** Limits of one session. */
export interface SessionBudgetOptions {
  /** Tool attempts the session may run, retries included. Default 100. */
  maxAttempts?: number;
  /** Wall time the session may spend inside tool calls (overlaps counted once). Default 30 min. */
  maxWallMs?: number;
  /** Clock, injected by tests. */
  now?: () => number;
}

interface Usage {
  attempts: number;
  wallMs: number;
  inFlight: number;
  since: number;
}

/**
 * In-memory accounting of each session's attempts and wall time. It lives as
 * long as the executor: a runtime that spreads one session over processes
 * passes limits per process or shares one instance.
 */
export class SessionBudget {
  readonly maxAttempts: number;
  readonly maxWallMs: number;
  readonly #now: () => number;
  readonly #usage = new Map<string, Usage>();

  constructor(options: SessionBudgetOptions = {}) {
    this.maxAttempts = options.maxAttempts ?? 100;
    this.maxWallMs = options.maxWallMs ?? 30 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** Attempts used and wall time spent so far by `sessionId`. */
  used(sessionId: string): { attempts: number; wallMs: number } {
    const u = this.#usage.get(sessionId);
    if (!u) return { attempts: 0, wallMs: 0 };
    const running = u.inFlight > 0 ? this.#now() - u.since : 0;
    return { attempts: u.attempts, wallMs: u.wallMs + running };
  }

  /** Wall time left, in ms (0 when spent). */
  wallLeft(sessionId: string): number {
    return Math.max(0, this.maxWallMs - this.used(sessionId).wallMs);
  }

  /** Why the session may not start another attempt, or undefined when it may. */
  exhausted(sessionId: string): string | undefined {
    const { attempts, wallMs } = this.used(sessionId);
    if (attempts >= this.maxAttempts)
      return `the session used all ${this.maxAttempts} tool attempts of its budget`;
    if (wallMs >= this.maxWallMs) return `the session spent all ${this.maxWallMs} ms of its tool time budget`;
    return undefined;
  }

  /** Counts one attempt when the budget allows it; false when it is exhausted. */
  takeAttempt(sessionId: string): boolean {
    if (this.exhausted(sessionId) !== undefined) return false;
    this.#get(sessionId).attempts++;
    return true;
  }

  /** Starts timing a call of `sessionId`; call the returned function when it ends. */
  enter(sessionId: string): () => void {
    const u = this.#get(sessionId);
    this.#settle(u);
    u.inFlight++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#settle(u);
      u.inFlight--;
    };
  }

  /** Drops what is known about `sessionId` (when the session ends). */
  forget(sessionId: string): void {
    this.#usage.delete(sessionId);
  }

  #settle(u: Usage): void {
    const now = this.#now();
    if (u.inFlight > 0) u.wallMs += now - u.since;
    u.since = now;
  }

  #get(sessionId: string): Usage {
    let u = this.#usage.get(sessionId);
    if (!u) {
      u = { attempts: 0, wallMs: 0, inFlight: 0, since: this.#now() };
      this.#usage.set(sessionId, u);
    }
    return u;
  }
}
