/**
 * Errors to RFC 9457 problem+json, in one place. Expected errors pass through
 * with their code; database outages become 503; everything else is a logged
 * bug answered with a bare 500 that carries no driver message, SQL or stack.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode, Problem } from '../contract/index.js';
import { isUnavailable, loggableError } from '../db/errors.js';
import { IdemError } from '../errors.js';

/** Fastify's own errors that are the client's fault. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_ARGUMENT',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_ARGUMENT',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_ARGUMENT',
  FST_ERR_BAD_URL: 'INVALID_ARGUMENT',
  FST_ERR_ASYNC_CONSTRAINT: 'INVALID_ARGUMENT',
};

/** Names the field of a schema validation error: `/leaseMs`, `metadata`, `status`. */
function validationField(err: FastifyError): string | undefined {
  const v = err.validation?.[0];
  if (!v) return undefined;
  const params = v.params as Record<string, unknown>;
  const base = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const extra = (params.missingProperty ?? params.additionalProperty) as string | undefined;
  if (extra) return base ? `${base}.${extra}` : extra;
  return base || err.validationContext;
}

export function toIdemError(err: unknown): IdemError | undefined {
  if (err instanceof IdemError) return err;
  const fe = err as FastifyError;
  if (fe?.validation) {
    const field = validationField(fe);
    const what = fe.validation[0];
    const msg =
      what?.keyword === 'additionalProperties'
        ? 'unknown field'
        : what?.keyword === 'required'
          ? 'is required'
          : (what?.message ?? 'is invalid');
    return new IdemError('INVALID_ARGUMENT', field ? `${field}: ${msg}` : msg, field ? { field } : {});
  }
  const mapped = typeof fe?.code === 'string' ? FASTIFY_CODES[fe.code] : undefined;
  if (mapped) return new IdemError(mapped, fe.message);
  if (isUnavailable(err)) return new IdemError('UNAVAILABLE', 'the database is unavailable; retry later');
  return undefined;
}

export function problemBody(e: IdemError, instance?: string): Problem {
  const body: Problem = {
    type: `urn:idem:problem:${e.code}`,
    title: e.title,
    status: e.status,
    detail: e.message,
    code: e.code,
    retryable: e.retryable,
  };
  if (instance) body.instance = instance;
  if (e.field) body.field = e.field;
  if (e.operation) body.operation = e.operation;
  return body;
}

export function sendProblem(reply: FastifyReply, e: IdemError, request?: FastifyRequest): FastifyReply {
  if (e.retryAfter !== undefined) reply.header('retry-after', String(e.retryAfter));
  if (e.code === 'UNAVAILABLE' && e.retryAfter === undefined) reply.header('retry-after', '1');
  if (e.code === 'UNAUTHENTICATED') reply.header('www-authenticate', 'Bearer');
  return reply
    .code(e.status)
    .type('application/problem+json')
    .send(problemBody(e, request?.url.split('?')[0]));
}

export function errorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const known = toIdemError(err);
  // The route's pattern, not its URL: the error is logged by where it happened, never by what was sent.
  const route = request.routeOptions.url ?? 'unknown';
  if (known) {
    if (known.code === 'UNAVAILABLE') {
      // An outage is expected and named by its SQLSTATE; a stack per request would bury it.
      const { stack: _stack, ...why } = loggableError(err);
      request.log.warn({ err: why, route }, 'database unavailable');
    }
    return sendProblem(reply, known, request);
  }
  request.log.error({ err: loggableError(err), route }, 'unhandled error');
  return sendProblem(reply, new IdemError('INTERNAL', 'internal error'), request);
}
