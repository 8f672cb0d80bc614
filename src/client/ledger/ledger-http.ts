/**
 * One HTTP exchange with the ledger: JSON in, JSON or a problem out, and the
 * retry rule of the client contract. Kept apart from the endpoint list so the
 * rule is readable in one place.
 */
import type { TSchema } from 'typebox';
import { Errors } from 'typebox/value';
import type { Operation } from '../../contract/index.js';
import { backoffDelay, type Random, realSleep, type Sleep } from './backoff.js';
import { LedgerError, parseRetryAfter } from './ledger-error.js';

/** How the client retries what is safe to retry. */
export interface LedgerRetryOptions {
  /** Total attempts of one call, the first included. Default 4. */
  attempts?: number;
  /** Ceiling of the first retry's delay. Default 100 ms. */
  baseMs?: number;
  /** No delay exceeds this. Default 2000 ms. */
  capMs?: number;
  /** Injected by tests so nothing really sleeps. */
  sleep?: Sleep;
  /** Injected by tests to pin the jitter. */
  random?: Random;
}

/** Settings of the transport, taken from the `LedgerClient` options. */
export interface LedgerHttpOptions {
  baseUrl: string;
  apiKey?: string;
  fetch?: typeof fetch;
  retry?: LedgerRetryOptions;
  /** Per-request timeout; a timeout counts as a transport error. Default 10 s. */
  requestTimeoutMs?: number;
  /** Check every 2xx body against the contract schema (BAD_RESPONSE otherwise). */
  validateResponses?: boolean;
}

/** One request to send. */
export interface LedgerRequest {
  method: 'GET' | 'POST';
  /** Already percent-encoded. */
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /**
   * Whether sending it twice does no harm, so an answer lost in transit may be
   * recovered by sending it again.
   */
  repeatable: boolean;
  /** The contract schema of the 2xx body. */
  schema: TSchema;
  signal?: AbortSignal | undefined;
}

/** A 2xx answer. */
export interface LedgerResponse<T> {
  status: number;
  body: T;
  headers: Headers;
}

// Connection-level failures that prove the request never left this process,
// so even a call that is unsafe to repeat may be sent again.
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** Sends requests to the ledger and applies the retry rule. */
export class LedgerHttp {
  readonly #base: string;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;
  readonly #attempts: number;
  readonly #baseMs: number;
  readonly #capMs: number;
  readonly #sleep: Sleep;
  readonly #random: Random;
  readonly #timeoutMs: number;
  readonly #validate: boolean;

  constructor(options: LedgerHttpOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, '');
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#headers = { accept: 'application/json, application/problem+json' };
    if (options.apiKey) this.#headers.authorization = `Bearer ${options.apiKey}`;
    this.#attempts = Math.max(1, options.retry?.attempts ?? 4);
    this.#baseMs = options.retry?.baseMs ?? 100;
    this.#capMs = options.retry?.capMs ?? 2000;
    this.#sleep = options.retry?.sleep ?? realSleep;
    this.#random = options.retry?.random ?? Math.random;
    this.#timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#validate = options.validateResponses ?? false;
  }

  /**
   * Sends `req`, retrying 503 (the contract promises nothing was written) and
   * transport failures when the request is repeatable or provably never sent.
   */
  async send<T>(req: LedgerRequest): Promise<LedgerResponse<T>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once<T>(req);
      } catch (err) {
        if (!(err instanceof LedgerError) || attempt >= this.#attempts) throw err;
        const safe =
          err.code === 'UNAVAILABLE' || (err.code === 'TRANSPORT' && (req.repeatable || !err.maybeApplied));
        if (!safe || req.signal?.aborted) throw err;
        const delay = backoffDelay(
          attempt,
          { baseMs: this.#baseMs, capMs: this.#capMs },
          this.#random,
          err.retryAfterMs,
        );
        await this.#sleep(delay, req.signal);
      }
    }
  }

  async #once<T>(req: LedgerRequest): Promise<LedgerResponse<T>> {
    const url = new URL(this.#base + req.path);
    for (const [name, value] of Object.entries(req.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
    const headers = { ...this.#headers };
    if (req.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    let text: string;
    try {
      res = await this.#fetch(url, {
        method: req.method,
        headers,
        body: req.body === undefined ? undefined : JSON.stringify(req.body),
        signal,
      });
      text = await res.text();
    } catch (err) {
      // The caller's own cancellation is not a transport failure: no retry.
      if (req.signal?.aborted) throw req.signal.reason;
      throw transportError(err);
    }
    if (res.status >= 200 && res.status < 300) {
      const body = parseJson(text);
      if (body === undefined) throw badResponse(res.status, 'the body is not JSON');
      if (this.#validate) {
        const errors = Errors(req.schema, body);
        if (errors.length > 0) {
          const first = errors.slice(0, 3).map((e) => `${e.instancePath || '/'} ${e.message}`);
          throw badResponse(res.status, `the body does not match the contract: ${first.join('; ')}`);
        }
      }
      return { status: res.status, body: body as T, headers: res.headers };
    }
    throw problemError(res, text);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function badResponse(status: number, message: string): LedgerError {
  return new LedgerError({ status, code: 'BAD_RESPONSE', message, retryable: false });
}

function transportError(err: unknown): LedgerError {
  const code = (err as { cause?: { code?: unknown } })?.cause?.code;
  const notSent = typeof code === 'string' && NOT_SENT_CODES.has(code);
  const detail = typeof code === 'string' ? code : err instanceof Error ? err.name : 'unknown';
  return new LedgerError({
    status: 0,
    code: 'TRANSPORT',
    message: `the ledger could not be reached (${detail})`,
    retryable: true,
    maybeApplied: !notSent,
    cause: err,
  });
}

function problemError(res: Response, text: string): LedgerError {
  const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
  const body = parseJson(text) as Record<string, unknown> | undefined;
  if (body && typeof body === 'object' && typeof body.code === 'string') {
    return new LedgerError({
      status: res.status,
      code: body.code as LedgerError['code'],
      message: String(body.detail ?? body.title ?? body.code),
      retryable: body.retryable === true,
      operation: body.operation as Operation | undefined,
      field: typeof body.field === 'string' ? body.field : undefined,
      retryAfterMs,
    });
  }
  if (res.status === 503) {
    return new LedgerError({
      status: 503,
      code: 'UNAVAILABLE',
      message: 'the ledger is unavailable',
      retryable: true,
      retryAfterMs,
    });
  }
  if (res.status === 502 || res.status === 504) {
    // A gateway answered, not the ledger: the request may have been applied.
    return new LedgerError({
      status: res.status,
      code: 'TRANSPORT',
      message: `a gateway answered ${res.status}`,
      retryable: true,
      maybeApplied: true,
      retryAfterMs,
    });
  }
  return badResponse(res.status, `HTTP ${res.status} without a problem document`);
}
