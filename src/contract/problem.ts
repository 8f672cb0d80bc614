/**
 * The error codes of the contract (RFC 9457 problem+json with `code` and
 * `retryable`). One list, shared by server and client.
 */
import { type Static, Type } from 'typebox';
import { Operation } from './operation.js';

/** One row per code: its HTTP status, its problem title, whether the same request may be retried later. */
export interface ErrorRow {
  readonly status: number;
  readonly title: string;
  readonly retryable: boolean;
}

const row = (status: number, title: string, retryable = false): ErrorRow => ({ status, title, retryable });

/** The error table, read by the server (problem+json) and by the client (classification). */
export const ERRORS = {
  INVALID_ARGUMENT: row(400, 'Invalid argument'),
  UNAUTHENTICATED: row(401, 'Unauthenticated'),
  SCOPE_FORBIDDEN: row(403, 'Forbidden'),
  NOT_FOUND: row(404, 'Not found'),
  METHOD_NOT_ALLOWED: row(405, 'Method not allowed'),
  REQUEST_TIMEOUT: row(408, 'Request timeout', true),
  OPERATION_IN_PROGRESS: row(409, 'Operation in progress', true),
  OUTCOME_UNKNOWN: row(409, 'Outcome unknown'),
  LEASE_LOST: row(409, 'Lease lost'),
  RESULT_MISMATCH: row(409, 'Result mismatch'),
  INVALID_STATE: row(409, 'Invalid state'),
  FINGERPRINT_MISMATCH: row(409, 'Fingerprint mismatch'),
  PAYLOAD_TOO_LARGE: row(413, 'Payload too large'),
  UNSUPPORTED_MEDIA_TYPE: row(415, 'Unsupported media type'),
  HEADERS_TOO_LARGE: row(431, 'Request header fields too large'),
  KEY_REUSED: row(422, 'Key reused'),
  RATE_LIMITED: row(429, 'Rate limited', true),
  INTERNAL: row(500, 'Internal error'),
  UNAVAILABLE: row(503, 'Service unavailable', true),
} as const satisfies Record<string, ErrorRow>;
export type ErrorCode = keyof typeof ERRORS;

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.Optional(Type.String()),
    instance: Type.Optional(Type.String()),
    code: Type.String(),
    retryable: Type.Boolean(),
    field: Type.Optional(Type.String({ description: 'the offending field, for INVALID_ARGUMENT' })),
    operation: Type.Optional(Operation),
  },
  { $id: 'Problem' },
);
export type Problem = Static<typeof Problem>;
