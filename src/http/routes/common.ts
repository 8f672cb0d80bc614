/** Route schema pieces shared by the route files. */
import { type Static, type TSchema, Type } from 'typebox';
import { Key, Problem, Scope } from '../../contract/index.js';
import { ref } from '../openapi.js';

export const ScopeParams = Type.Object({ scope: Scope });
export type ScopeParams = Static<typeof ScopeParams>;
export const KeyParams = Type.Object({ scope: Scope, key: Key });
export type KeyParams = Static<typeof KeyParams>;

/** Response headers, as documented in openapi.yaml (the routes or hooks that set them are the truth). */
export const HEADERS = {
  requestId: {
    'x-request-id': {
      type: 'string',
      description: "the request id: the caller's `x-request-id`, else a new UUID; every log line carries it",
    },
  },
  retryAfter: {
    'retry-after': { type: 'integer', minimum: 0, description: 'seconds to wait before trying again' },
  },
  replayed: {
    'idempotent-replayed': {
      type: 'string',
      enum: ['true'],
      description: 'present on a replay: the stored outcome of an earlier call, nothing ran again',
    },
  },
} as const;

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: 'INVALID_ARGUMENT: the problem names the field',
  401: 'UNAUTHENTICATED: no valid API key',
  403: 'SCOPE_FORBIDDEN: the key may not use this scope, or the endpoint needs an operator key',
  404: 'NOT_FOUND',
  409: 'a conflict: OPERATION_IN_PROGRESS (with Retry-After), OUTCOME_UNKNOWN, LEASE_LOST, RESULT_MISMATCH, INVALID_STATE, FINGERPRINT_MISMATCH',
  413: 'PAYLOAD_TOO_LARGE: the problem names the field',
  415: 'UNSUPPORTED_MEDIA_TYPE: bodies are JSON',
  422: 'KEY_REUSED: the key was used with another request',
  429: 'RATE_LIMITED: this key sent too many requests; see Retry-After',
  503: 'UNAVAILABLE: the database is unreachable; see Retry-After',
};
/** Statuses whose answer may carry Retry-After. */
const RETRY_STATUSES = new Set([409, 429, 503]);

/** A documented `application/json` answer with its headers. */
export function answer(schema: TSchema, description: string, headers: Record<string, object> = {}) {
  return {
    description,
    headers: { ...HEADERS.requestId, ...headers },
    content: { 'application/json': { schema: '$id' in schema ? ref(schema) : schema } },
  };
}

/** `{ 400: ..., 503: ... }`: RFC 9457 problems as `application/problem+json`, for exactly these statuses. */
export function problemResponses(statuses: number[]) {
  return Object.fromEntries(
    [...new Set(statuses)].sort().map((s) => [
      s,
      {
        description: PROBLEM_DESCRIPTIONS[s] ?? 'a problem',
        headers: { ...HEADERS.requestId, ...(RETRY_STATUSES.has(s) ? HEADERS.retryAfter : {}) },
        content: { 'application/problem+json': { schema: ref(Problem) } },
      },
    ]),
  );
}

/** A /v1 route's problems: these, and the 401, 429 and 503 that every /v1 route may answer. */
export const problems = (...statuses: number[]) => problemResponses([...statuses, 401, 429, 503]);
