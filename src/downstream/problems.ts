/**
 * The middleware's own answers, as RFC 9457 problem+json with `code` and
 * `retryable`, like the ledger's. The two key codes exist only here: the
 * ledger never sees a request without a well-formed key.
 */
import type { WireResponse } from './stored-response.js';

/** Every answer the middleware gives instead of the handler's. */
export const DOWNSTREAM_PROBLEMS = {
  IDEMPOTENCY_KEY_MISSING: { status: 400, title: 'Idempotency key missing', retryable: false },
  IDEMPOTENCY_KEY_INVALID: { status: 400, title: 'Idempotency key invalid', retryable: false },
  KEY_REUSED: { status: 422, title: 'Key reused', retryable: false },
  OPERATION_IN_PROGRESS: { status: 409, title: 'Operation in progress', retryable: true },
  OUTCOME_UNKNOWN: { status: 409, title: 'Outcome unknown', retryable: false },
  INVALID_STATE: { status: 409, title: 'Invalid state', retryable: false },
  INTERNAL: { status: 500, title: 'Internal error', retryable: false },
  UNAVAILABLE: { status: 503, title: 'Service unavailable', retryable: true },
} as const;

export type DownstreamProblemCode = keyof typeof DOWNSTREAM_PROBLEMS;

/** A problem response; `retryAfter` in seconds becomes `Retry-After`. */
export function problemResponse(
  code: DownstreamProblemCode,
  detail: string,
  extra: { retryAfter?: number; operationId?: string } = {},
): WireResponse {
  const p = DOWNSTREAM_PROBLEMS[code];
  const body: Record<string, unknown> = {
    type: 'about:blank',
    title: p.title,
    status: p.status,
    detail,
    code,
    retryable: p.retryable,
  };
  // The id, never the operation: its result is another request's stored body.
  if (extra.operationId) body.operationId = extra.operationId;
  const headers: Record<string, string> = { 'content-type': 'application/problem+json' };
  if (extra.retryAfter !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(extra.retryAfter)));
  return { status: p.status, headers, body: Buffer.from(JSON.stringify(body)) };
}
