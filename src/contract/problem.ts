/**
 * The error codes of the contract (RFC 9457 problem+json with `code` and
 * `retryable`). One list, shared by server and client.
 */
import { type Static, Type } from 'typebox';
import { Operation } from './operation.js';

export const ERROR_CODES = {
  INVALID_ARGUMENT: 400,
  UNAUTHENTICATED: 401,
  SCOPE_FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  OPERATION_IN_PROGRESS: 409,
  OUTCOME_UNKNOWN: 409,
  LEASE_LOST: 409,
  RESULT_MISMATCH: 409,
  INVALID_STATE: 409,
  FINGERPRINT_MISMATCH: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  KEY_REUSED: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  UNAVAILABLE: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

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
