/**
 * The one error class. Every expected failure is an `IdemError` with a
 * stable code; the HTTP layer maps it to problem+json in one place
 * (`http/problem.ts`); status, title and retryable come from the one table,
 * `ERRORS` in `contract/problem.ts`. Anything else is a bug and becomes a bare 500.
 */
import { ERRORS, type ErrorCode, type Operation } from './contract/index.js';

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
    const row = ERRORS[code];
    this.status = row.status;
    this.title = row.title;
    this.retryable = row.retryable;
    if (extras.field !== undefined) this.field = extras.field;
    if (extras.operation !== undefined) this.operation = extras.operation;
    if (extras.retryAfter !== undefined) this.retryAfter = extras.retryAfter;
  }
}

export const invalid = (field: string, detail: string) =>
  new IdemError('INVALID_ARGUMENT', `${field}: ${detail}`, { field });
