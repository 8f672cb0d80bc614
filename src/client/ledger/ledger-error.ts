/**
 * The typed error of every failed ledger call: an RFC 9457 problem answered by
 * the service, or a transport failure on the way there or back.
 */
import type { ErrorCode, Operation } from '../../contract/index.js';

/**
 * Codes a `LedgerError` can carry: the contract's problem codes, plus two of
 * the client's own for failures that never produced a problem document.
 * `TRANSPORT` (connection refused or reset, timeout, gateway 502/504) and
 * `BAD_RESPONSE` (the body was not what the contract promises).
 */
export type LedgerErrorCode = ErrorCode | 'TRANSPORT' | 'BAD_RESPONSE';

/** What a `LedgerError` is built from. */
export interface LedgerErrorInit {
  status: number;
  code: LedgerErrorCode;
  message: string;
  retryable: boolean;
  operation?: Operation;
  retryAfterMs?: number;
  field?: string;
  /**
   * True when the request may have reached the service and changed something
   * although no answer came back (reset after sending, timeout, 502/504).
   */
  maybeApplied?: boolean;
  cause?: unknown;
}

/** A failed ledger call. `status` is 0 when no HTTP answer arrived. */
export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  /** HTTP status, or 0 for a transport failure. */
  readonly status: number;
  /** Stable code from the contract (`KEY_REUSED`, `LEASE_LOST`, ...). */
  readonly code: LedgerErrorCode;
  /** Whether repeating the same call may succeed, as the service said. */
  readonly retryable: boolean;
  /** The operation the problem is about, where the caller may see it. */
  readonly operation: Operation | undefined;
  /** From `Retry-After`, in ms. */
  readonly retryAfterMs: number | undefined;
  /** The offending field of an `INVALID_ARGUMENT`. */
  readonly field: string | undefined;
  /** See {@link LedgerErrorInit.maybeApplied}. */
  readonly maybeApplied: boolean;

  constructor(init: LedgerErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.retryable = init.retryable;
    this.operation = init.operation;
    this.retryAfterMs = init.retryAfterMs;
    this.field = init.field;
    this.maybeApplied = init.maybeApplied ?? false;
  }
}

/** True when `err` is a `LedgerError` with one of `codes`. */
export function isLedgerError(err: unknown, ...codes: LedgerErrorCode[]): err is LedgerError {
  return err instanceof LedgerError && (codes.length === 0 || codes.includes(err.code));
}

/**
 * `Retry-After` in ms: delta-seconds or an HTTP date. Undefined when absent or
 * unreadable, so a malformed header never turns into a zero wait.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
