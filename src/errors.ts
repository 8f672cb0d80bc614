/**
 * The one error catalogue. Every expected failure is an `IdemError` with a
 * stable code; the HTTP layer maps it to problem+json in one place
 * (`http/problem.ts`). Anything else is a bug and becomes a bare 500.
 */
import { ERROR_CODES, type ErrorCode, type Operation } from './contract/index.js';

const TITLES: Record<ErrorCode, string> = {
  INVALID_ARGUMENT: 'Invalid argument',
  UNAUTHENTICATED: 'Unauthenticated',
  SCOPE_FORBIDDEN: 'Forbidden',
  NOT_FOUND: 'Not found',
  METHOD_NOT_ALLOWED: 'Method not allowed',
  OPERATION_IN_PROGRESS: 'Operation in progress',
  OUTCOME_UNKNOWN: 'Outcome unknown',
  LEASE_LOST: 'Lease lost',
  RESULT_MISMATCH: 'Result mismatch',
  INVALID_STATE: 'Invalid state',
  FINGERPRINT_MISMATCH: 'Fingerprint mismatch',
  PAYLOAD_TOO_LARGE: 'Payload too large',
  UNSUPPORTED_MEDIA_TYPE: 'Unsupported media type',
  KEY_REUSED: 'Key reused',
  RATE_LIMITED: 'Rate limited',
  INTERNAL: 'Internal error',
  UNAVAILABLE: 'Service unavailable',
};

/** Codes a client may retry as they are (same request, later). */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set(['OPERATION_IN_PROGRESS', 'RATE_LIMITED', 'UNAVAILABLE']);

export interface IdemErrorExtras {
  field?: string;
  operation?: Operation;
  /** Seconds, sent as `Retry-After`. */
  retryAfter?: number;
}

export class IdemError extends Error {
  override name = 'IdemError';
  readonly status: number;
  readonly title: string;
  readonly retryable: boolean;
  readonly field?: string;
  readonly operation?: Operation;
  readonly retryAfter?: number;

  constructor(
    readonly code: ErrorCode,
    detail: string,
    extras: IdemErrorExtras = {},
  ) {
    super(detail);
    this.status = ERROR_CODES[code];
    this.title = TITLES[code];
    this.retryable = RETRYABLE.has(code);
    if (extras.field !== undefined) this.field = extras.field;
    if (extras.operation !== undefined) this.operation = extras.operation;
    if (extras.retryAfter !== undefined) this.retryAfter = extras.retryAfter;
  }
}

export const invalid = (field: string, detail: string) =>
  new IdemError('INVALID_ARGUMENT', `${field}: ${detail}`, { field });
