/**
 * Errors raised below fastify, by Node's HTTP parser, answered as problems
 * like every other error: headers over 16 KiB, an unknown method, NUL or
 * non-ASCII bytes in the request target, control bytes in a header value, a
 * bad Content-Length, a request that took too long. Node would answer these
 * itself with a bare JSON or empty body. The connection is closed after the
 * answer: the parser cannot tell where the next request would start.
 *
 * Nothing of the request is echoed or logged (the raw packet can carry an
 * Authorization header): only the parser's error code.
 */
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { ErrorCode } from '../contract/index.js';
import { IdemError } from '../errors.js';
import { problemBody } from './problem.js';

/** llhttp's error codes, by what the client sent, with fixed texts that quote nothing. */
const PARSER_ERRORS: Record<string, [ErrorCode, string]> = {
  HPE_HEADER_OVERFLOW: ['HEADERS_TOO_LARGE', 'the request headers exceed 16 KiB'],
  HPE_INVALID_METHOD: ['METHOD_NOT_ALLOWED', 'not an HTTP method this service knows'],
  HPE_INVALID_URL: [
    'INVALID_ARGUMENT',
    'the request target has bytes a URL may not contain (percent-encode them)',
  ],
  HPE_INVALID_HEADER_TOKEN: [
    'INVALID_ARGUMENT',
    'a header name or value has a byte a header may not contain',
  ],
  HPE_INVALID_CONTENT_LENGTH: ['INVALID_ARGUMENT', 'Content-Length is not a single decimal number'],
  HPE_UNEXPECTED_CONTENT_LENGTH: ['INVALID_ARGUMENT', 'Content-Length and Transfer-Encoding together'],
  HPE_INVALID_TRANSFER_ENCODING: ['INVALID_ARGUMENT', 'an unsupported Transfer-Encoding'],
  HPE_INVALID_CHUNK_SIZE: ['INVALID_ARGUMENT', 'a malformed chunk size'],
  ERR_HTTP_REQUEST_TIMEOUT: ['REQUEST_TIMEOUT', 'the request was not received in time'],
  ERR_HTTP_HEADERS_TIMEOUT: ['REQUEST_TIMEOUT', 'the request headers were not received in time'],
};
const MALFORMED: [ErrorCode, string] = ['INVALID_ARGUMENT', 'a malformed HTTP request'];

/** fastify's `clientErrorHandler`: one problem+json answer, then the connection closes. */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [code, detail] = (err.code && PARSER_ERRORS[err.code]) || MALFORMED;
  this.log.debug({ code: err.code }, 'malformed request refused by the HTTP parser');
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const e = new IdemError(code, detail);
  const body = JSON.stringify(problemBody(e));
  const head = [
    `HTTP/1.1 ${e.status} ${e.title}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...(e.retryable ? ['Retry-After: 1'] : []),
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}

/**
 * HTTP/1.1 requires a Host header (RFC 9112, 3.2). Node checks it itself but
 * answers with an empty body, so the check is made here instead, first of
 * all hooks (`requireHostHeader: false` hands it over). A callback hook, as
 * every hook on the hot path (`app.ts`).
 */
export function requireHost(
  request: FastifyRequest,
  reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
    // A malformed request: the connection closes after the answer, as for the parser's errors.
    reply.header('connection', 'close');
    done(new IdemError('INVALID_ARGUMENT', 'an HTTP/1.1 request needs a Host header'));
    return;
  }
  done();
}
