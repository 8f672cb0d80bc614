/**
 * `idem/express`: the `Idempotency-Key` middleware over the shared core.
 * Imports nothing from express at runtime (types only): the response is
 * captured by wrapping `writeHead` / `write` / `end`, stored, and only then
 * written out, so a retry after the answer arrived always finds it stored.
 *
 *   const idem = idempotency({ ledger, scope: (req) => req.user.tenantId });
 *   app.post('/tickets', idem.route({ required: true, effect: 'non_idempotent_write' }), handler);
 *   app.use(idem.errors); // after the routes: lets notApplied(err) reach the middleware
 *
 * Mount it on the route (as above) so the fingerprint uses the route's
 * pattern (`req.route.path`); mounted with `app.use` it falls back to the path.
 */
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { IdempotencyCore, type Run } from './core.js';
import type { DownstreamLog, IdempotencyOptions, RequestIdempotency, RouteIdempotency } from './options.js';
import type { WireResponse } from './stored-response.js';

declare global {
  namespace Express {
    interface Request {
      /** Set while the handler runs under an idempotency lease. */
      idempotency?: RequestIdempotency;
    }
  }
}

/** Options of the express middleware. `logger`: pino-like; warnings go to the console when absent. */
export interface ExpressIdempotencyOptions extends IdempotencyOptions<Request> {
  logger?: DownstreamLog;
}

/** The middleware (default settings), a per-route variant, and the error recorder. */
export interface IdempotencyMiddleware extends RequestHandler {
  route(config?: RouteIdempotency<Request> | false): RequestHandler;
  errors: ErrorRequestHandler;
}

const kError = Symbol('idem.error');
type Tracked = Response & { [kError]?: unknown };

const consoleLog: DownstreamLog = {
  info: () => {},
  warn: (obj, msg) => console.warn(msg, JSON.stringify(obj)),
  error: (obj, msg) => console.error(msg, JSON.stringify(obj)),
};

function chunkOf(chunk: unknown, encoding?: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk);
  return Buffer.from(String(chunk), typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
}

/** Holds the response back until `run.finish` has stored it. */
function capture(res: Response, run: Run): void {
  const chunks: Buffer[] = [];
  const { end, write, writeHead } = res;
  let ended = false;
  res.writeHead = ((status: number, reason?: unknown, headers?: unknown) => {
    res.statusCode = status;
    if (typeof reason === 'string') res.statusMessage = reason;
    const h = (typeof reason === 'object' ? reason : headers) as Record<string, string> | undefined;
    if (h && !Array.isArray(h)) for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    return res;
  }) as Response['writeHead'];
  res.write = ((chunk: unknown, encoding?: unknown, cb?: unknown) => {
    chunks.push(chunkOf(chunk, encoding));
    const done = typeof encoding === 'function' ? encoding : cb;
    if (typeof done === 'function') queueMicrotask(() => done());
    return true;
  }) as Response['write'];
  res.end = ((chunk?: unknown, encoding?: unknown, cb?: unknown) => {
    if (typeof chunk === 'function') [cb, chunk] = [chunk, undefined];
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    if (chunk !== undefined && chunk !== null) chunks.push(chunkOf(chunk, encoding));
    if (ended) return res;
    ended = true;
    const original: WireResponse = {
      status: res.statusCode,
      headers: res.getHeaders() as Record<string, string>,
      body: Buffer.concat(chunks),
    };
    void run.finish(original, (res as Tracked)[kError]).then((sent) => {
      if (sent !== original) {
        for (const name of res.getHeaderNames()) res.removeHeader(name);
        res.statusCode = sent.status;
        for (const [k, v] of Object.entries(sent.headers)) res.setHeader(k, v);
        res.setHeader('content-length', sent.body.length);
      }
      // node's own end() calls writeHead() for the implicit header: give the originals back first.
      res.writeHead = writeHead;
      res.write = write;
      res.end = end;
      res.end(sent.body, typeof cb === 'function' ? (cb as () => void) : undefined);
    });
    return res;
  }) as Response['end'];
  // No 'close' handler on purpose: a client that hangs up does not stop the handler,
  // which still ends the response (written nowhere) and settles the operation then;
  // settling earlier would roll back a transaction the handler is still using.
}

/** Builds the middleware. */
export function idempotency(options: ExpressIdempotencyOptions): IdempotencyMiddleware {
  const core = new IdempotencyCore<Request>(options);
  const log = options.logger ?? consoleLog;

  const route =
    (config?: RouteIdempotency<Request> | false): RequestHandler =>
    (req: Request, res: Response, next: NextFunction) => {
      if (!core.intercepts(req.method, config)) return next();
      const pattern = req.route?.path
        ? `${req.baseUrl}${String(req.route.path)}`
        : `${req.baseUrl}${req.path}`;
      core
        .enter(
          {
            req,
            method: req.method,
            route: pattern,
            keyHeader: req.headers['idempotency-key'],
            body: req.body,
            log,
          },
          config,
        )
        .then((entry) => {
          if (entry.kind === 'pass') return next();
          if (entry.kind === 'answer') {
            res.status(entry.response.status);
            for (const [k, v] of Object.entries(entry.response.headers)) res.setHeader(k, v);
            res.end(entry.response.body);
            return;
          }
          req.idempotency = entry.run.idempotency;
          capture(res, entry.run);
          next();
        }, next);
    };

  const middleware = route() as IdempotencyMiddleware;
  middleware.route = route;
  middleware.errors = (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    (res as Tracked)[kError] = err;
    next(err);
  };
  return middleware;
}

export default idempotency;
export type { IdempotencyOptions, RequestIdempotency, RouteIdempotency } from './options.js';
export { notApplied } from './options.js';
