/**
 * The shared core of `idem/fastify` and `idem/express`: what a request with
 * an `Idempotency-Key` comes to (docs/downstream.md, section 1). The adapters only
 * translate their framework's request and response to this and back.
 *
 *   enter ──▶ not intercepted (method, no key on an optional route) ──▶ handler, unguarded
 *         ├─▶ answer: a replay (stored bytes + Idempotent-Replayed) or a problem
 *         └─▶ run: the handler runs under a lease (heartbeated) ──▶ finish(response)
 *                 2xx/3xx complete succeeded, 4xx complete failed (both stored)
 *                 5xx / throw: unknown or release (see RouteIdempotency.onServerError)
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { LIMITS } from '../contract/index.js';
import { loggableError } from '../db/errors.js';
import { IdemError } from '../errors.js';
import { parseIdempotencyKey } from './key.js';
import { asDownstreamLedger, type Claim, type DownstreamLedger } from './ledger.js';
import {
  DEFAULT_LEASE_MS,
  DEFAULT_METHODS,
  type DownstreamLog,
  type IdempotencyOptions,
  isNotApplied,
  type RequestIdempotency,
  type RouteIdempotency,
  SAFE_METHODS,
} from './options.js';
import { problemResponse } from './problems.js';
import {
  DEFAULT_STORED_HEADERS,
  decodeResponse,
  encodeResponse,
  storableHeaders,
  type WireResponse,
} from './stored-response.js';

/** The request, as an adapter describes it. */
export interface CoreRequest<Req> {
  req: Req;
  method: string;
  /** The route's pattern (`/tickets/:id`), not the URL. */
  route: string;
  keyHeader: string | string[] | undefined;
  /** The parsed body (JSON value, string, Buffer or undefined). */
  body: unknown;
  log: DownstreamLog;
}

/** A handler running under a lease. */
export interface Run {
  idempotency: RequestIdempotency;
  /**
   * Stores (or settles) the handler's response and says what to send: the
   * same response, or a 503 when a transaction could not commit.
   */
  finish(response: WireResponse, error?: unknown): Promise<WireResponse>;
  /** No response will be sent (connection closed, stream body): settle as a failure. */
  abandon(error?: unknown): Promise<void>;
}

export type Entry = { kind: 'pass' } | { kind: 'answer'; response: WireResponse } | { kind: 'run'; run: Run };

/** Leaves room under the ledger's result limit for the envelope and base64. */
const MAX_STORED_BODY = Math.floor(((LIMITS.resultBytes - 8192) * 3) / 4);

/** The RFC 8785 fingerprint of a JSON value. */
export function fingerprintOf(value: unknown): string {
  const text = canonicalize(value) ?? 'null';
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`;
}

function jsonable(body: unknown): unknown {
  if (body === undefined) return null;
  if (Buffer.isBuffer(body)) return { base64: body.toString('base64') };
  return body;
}

/** One instance per plugin registration / middleware. */
export class IdempotencyCore<Req> {
  readonly #ledger: DownstreamLedger;
  readonly #options: IdempotencyOptions<Req>;
  readonly #methods: Set<string>;

  constructor(options: IdempotencyOptions<Req>) {
    this.#options = options;
    this.#ledger = asDownstreamLedger(options.ledger);
    this.#methods = new Set((options.methods ?? DEFAULT_METHODS).map((m) => m.toUpperCase()));
  }

  /**
   * Whether a request is intercepted: never GET, HEAD or OPTIONS; otherwise a
   * method of `methods`, or any method on a route that configures idempotency.
   */
  intercepts(method: string, routeConfig?: RouteIdempotency<Req> | false): boolean {
    const m = method.toUpperCase();
    if (routeConfig === false || SAFE_METHODS.has(m)) return false;
    return routeConfig !== undefined || this.#methods.has(m);
  }

  async enter(r: CoreRequest<Req>, routeConfig: RouteIdempotency<Req> | false | undefined): Promise<Entry> {
    if (!this.intercepts(r.method, routeConfig)) return { kind: 'pass' };
    const cfg: RouteIdempotency<Req> = { ...this.#options, ...routeConfig };
    const parsed = parseIdempotencyKey(r.keyHeader);
    if (!parsed.ok) {
      if (parsed.reason === 'missing' && !cfg.required) return { kind: 'pass' };
      return parsed.reason === 'missing'
        ? answer(problemResponse('IDEMPOTENCY_KEY_MISSING', 'this route requires an Idempotency-Key header'))
        : answer(
            problemResponse(
              'IDEMPOTENCY_KEY_INVALID',
              'Idempotency-Key must be one sf-string or token of 1 to 255 printable characters',
            ),
          );
    }
    const key = parsed.key;
    const scopeOpt = this.#options.scope ?? 'default';
    const scope = typeof scopeOpt === 'function' ? await scopeOpt(r.req) : scopeOpt;
    const effect = cfg.effect ?? 'unclassified';
    const leaseMs = cfg.leaseMs ?? DEFAULT_LEASE_MS;
    const fingerprint = fingerprintOf(
      cfg.fingerprint
        ? cfg.fingerprint(r.req)
        : { method: r.method.toUpperCase(), route: r.route, body: jsonable(r.body) },
    );
    const logCtx = { idempotencyKey: key, scope };

    let claimed: Awaited<ReturnType<DownstreamLedger['claim']>>;
    try {
      claimed = await this.#ledger.claim({
        scope,
        key,
        fingerprint,
        effect,
        leaseMs,
        transactional: cfg.transactional === true,
        ...(this.#options.owner ? { owner: this.#options.owner } : {}),
        metadata: { method: r.method.toUpperCase(), route: r.route },
      });
    } catch (err) {
      const refused = refusalAnswer(err);
      if (refused) {
        r.log.info({ ...logCtx, code: (err as IdemError).code }, 'idempotency: refused');
        return refused;
      }
      if (err instanceof IdemError && err.code !== 'UNAVAILABLE') throw err; // a configuration bug
      if (this.#options.failOpen) {
        r.log.warn(
          { ...logCtx, err: errText(err) },
          'idempotency: ledger unreachable, running unguarded (failOpen)',
        );
        return { kind: 'pass' };
      }
      r.log.error(
        { ...logCtx, err: errText(err) },
        'idempotency: ledger unreachable, refusing (fail closed)',
      );
      return answer(
        problemResponse('UNAVAILABLE', 'the idempotency ledger cannot be reached; retry with the same key', {
          retryAfter: 1,
        }),
      );
    }

    if (claimed.kind === 'replayed') {
      const op = claimed.operation;
      const stored = decodeResponse(op.result);
      r.log.info({ ...logCtx, operationId: op.id, status: op.status }, 'idempotency: replayed');
      if (!stored) {
        // Resolved by an operator (or too large to store): there are no bytes to replay.
        if (op.status === 'succeeded' && op.result !== null && !isTooLarge(op.result)) {
          return answer({
            status: 200,
            headers: { 'content-type': 'application/json', 'idempotent-replayed': 'true' },
            body: Buffer.from(JSON.stringify(op.result)),
          });
        }
        return answer(
          problemResponse(
            'INVALID_STATE',
            `this operation ${op.status} without a response that can be replayed`,
            {
              operationId: op.id,
            },
          ),
        );
      }
      return answer({ ...stored, headers: { ...stored.headers, 'idempotent-replayed': 'true' } });
    }
    return { kind: 'run', run: this.#run(claimed.claim, cfg, { key, scope, effect, leaseMs }, r.log) };
  }

  #run(
    claim: Claim,
    cfg: RouteIdempotency<Req>,
    at: { key: string; scope: string; effect: string; leaseMs: number },
    log: DownstreamLog,
  ): Run {
    const logCtx = { idempotencyKey: at.key, scope: at.scope, operationId: claim.operationId };
    let settled = false;
    // A third of the lease: two heartbeats may be lost before it runs out.
    const timer = claim.tx
      ? undefined
      : setInterval(
          () => {
            claim.heartbeat(at.leaseMs).catch((err) => {
              log.warn({ ...logCtx, err: errText(err) }, 'idempotency: heartbeat failed');
              // Superseded or lapsed: no heartbeat can bring the lease back.
              if ((err as { code?: unknown }).code === 'LEASE_LOST') clearInterval(timer);
            });
          },
          Math.max(250, Math.floor(at.leaseMs / 3)),
        );
    timer?.unref();
    const allow = [...DEFAULT_STORED_HEADERS, ...(cfg.headers ?? [])];

    const settleFailure = async (error: unknown) => {
      const decision =
        cfg.onServerError ??
        (isNotApplied(error) || at.effect === 'read' || at.effect === 'idempotent_write'
          ? 'release'
          : 'unknown');
      try {
        await (decision === 'release' ? claim.release() : claim.unknown());
        log.warn({ ...logCtx, decision }, 'idempotency: handler failed');
      } catch (err) {
        log.error(
          { ...logCtx, decision, err: errText(err) },
          'idempotency: could not settle a failed handler',
        );
      }
    };

    return {
      idempotency: {
        key: at.key,
        scope: at.scope,
        operationId: claim.operationId,
        attempt: claim.attempt,
        recovered: claim.recovered,
        ...(claim.tx ? { tx: claim.tx } : {}),
      },
      finish: async (response, error) => {
        if (settled) return response;
        settled = true;
        clearInterval(timer);
        if (response.status >= 500) {
          await settleFailure(error);
          return response;
        }
        const headers = storableHeaders(response.headers, allow);
        const result =
          response.body.length > MAX_STORED_BODY
            ? { v: 1, status: response.status, headers, body: null, tooLarge: true }
            : encodeResponse({ status: response.status, headers, body: response.body });
        const status = response.status < 400 ? 'succeeded' : 'failed';
        try {
          await claim.complete(status, result);
          log.info({ ...logCtx, status: response.status }, 'idempotency: stored');
          return response;
        } catch (err) {
          log.error({ ...logCtx, err: errText(err) }, 'idempotency: could not store the response');
          // A transaction that did not commit left nothing: the client must hear so, and may retry.
          if (claim.tx) {
            return problemResponse(
              'UNAVAILABLE',
              'the response could not be committed; retry with the same key',
              {
                retryAfter: 1,
              },
            );
          }
          return response; // the effect happened; the lease runs out into outcome_unknown or a re-run
        }
      },
      abandon: async (error) => {
        if (settled) return;
        settled = true;
        clearInterval(timer);
        await settleFailure(error);
      },
    };
  }
}

const isTooLarge = (result: unknown) =>
  typeof result === 'object' && result !== null && (result as { tooLarge?: unknown }).tooLarge === true;

function answer(response: WireResponse): Entry {
  return { kind: 'answer', response };
}

function refusalAnswer(err: unknown): Entry | undefined {
  if (!(err instanceof IdemError)) return undefined;
  const operationId = err.operation?.id;
  const extra = operationId ? { operationId } : {};
  switch (err.code) {
    case 'KEY_REUSED':
      return answer(
        problemResponse('KEY_REUSED', 'this Idempotency-Key was used with a different request', extra),
      );
    case 'OPERATION_IN_PROGRESS':
      return answer(
        problemResponse('OPERATION_IN_PROGRESS', 'a request with this Idempotency-Key is being processed', {
          ...extra,
          retryAfter: err.retryAfter ?? 1,
        }),
      );
    case 'OUTCOME_UNKNOWN':
      return answer(
        problemResponse(
          'OUTCOME_UNKNOWN',
          'the outcome of the first request with this key is unknown; it will not run again until it is resolved',
          extra,
        ),
      );
    case 'INVALID_ARGUMENT':
      if (err.field !== 'key') return undefined;
      return answer(problemResponse('IDEMPOTENCY_KEY_INVALID', err.message));
    default:
      return undefined;
  }
}

/**
 * An error as logged: the driver's own message and code, never drizzle's
 * message (it carries the SQL's parameters: the stored bodies).
 */
export function errText(err: unknown): string {
  const e = loggableError(err);
  return `${String(e.type ?? 'Error')}: ${String(e.message ?? '')}${e.code ? ` (${String(e.code)})` : ''}`;
}
