/**
 * `ToolError`: how a tool tells the executor what kind of failure it hit, so
 * the executor can decide between retrying, releasing, failing and marking
 * the outcome unknown.
 */

/** Codes a tool may throw (any other string is accepted and treated as "other"). */
export type ToolErrorCode =
  | 'INVALID_ARGUMENT'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'RATE_LIMITED'
  | 'TIMEOUT'
  | 'UPSTREAM_UNAVAILABLE'
  | (string & {});

/** Codes that say "repeating the same call fails the same way": never retried. */
export const TERMINAL_CODES: readonly string[] = [
  'INVALID_ARGUMENT',
  'PERMISSION_DENIED',
  'NOT_FOUND',
  'CONFLICT',
];

/** Codes of passing trouble: retried for reads and idempotent writes when `retryable`. */
export const TRANSIENT_CODES: readonly string[] = ['RATE_LIMITED', 'TIMEOUT', 'UPSTREAM_UNAVAILABLE'];

/** Options of a {@link ToolError}. */
export interface ToolErrorOptions {
  /** Whether trying again may succeed. Default: true for the transient codes, else false. */
  retryable?: boolean;
  /**
   * The tool KNOWS it had no effect (the request was refused before anything
   * was written, the connection was never made). Lets even a non-idempotent
   * write be released as "did not run" instead of "outcome unknown".
   */
  notApplied?: boolean;
  /** A wait the upstream asked for (Retry-After); a floor for the next backoff. */
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * A failure the tool understands. Its `message` is shown to the model, so it
 * must not carry secrets, SQL or stack traces.
 */
export class ToolError extends Error {
  override readonly name = 'ToolError';
  readonly code: ToolErrorCode;
  readonly retryable: boolean;
  readonly notApplied: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(code: ToolErrorCode, message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? TRANSIENT_CODES.includes(code);
    this.notApplied = options.notApplied ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }
}
