/**
 * The options of `idem/fastify` and `idem/express`: plugin-wide defaults,
 * and per route (fastify `config.idempotency`, express `idem.route({...})`).
 */
import type { LedgerClient } from '../client/index.js';
import type { Effect } from '../contract/index.js';
import type { DownstreamLedger } from './ledger.js';

/** What a route says about its idempotency. Route values override the plugin's. */
export interface RouteIdempotency<Req = unknown> {
  /** A request without `Idempotency-Key` is refused (400) instead of run unguarded. Default false. */
  required?: boolean;
  /** The effect class of the handler (fixed per operation). Default `unclassified`. */
  effect?: Effect;
  /** The lease the handler runs under; it is heartbeated every third. Default 30 000 ms. */
  leaseMs?: number;
  /** Response headers stored and replayed besides `content-type` and `location`. */
  headers?: readonly string[];
  /**
   * PgLedger only: run the handler inside the ledger's transaction
   * (`request.idempotency.tx`), committed with the stored response.
   */
  transactional?: boolean;
  /**
   * What a 5xx or a throw does to the operation. Default: `unknown` for
   * `non_idempotent_write` and `unclassified`, `release` for `read` and
   * `idempotent_write` and for errors marked with `notApplied()`.
   */
  onServerError?: 'unknown' | 'release';
  /**
   * The JSON value fingerprinted instead of `{ method, route, body }`, e.g.
   * to include a path parameter or a header that selects the target.
   */
  fingerprint?: (req: Req) => unknown;
}

/** A pino-like logger (fastify's `request.log` is one). */
export interface DownstreamLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Options of the plugin / middleware. */
export interface IdempotencyOptions<Req = unknown> extends RouteIdempotency<Req> {
  /** A `LedgerClient` (the remote service) or a `PgLedger`. */
  ledger: DownstreamLedger | LedgerClient;
  /**
   * The operation's scope: trusted, from authentication (a tenant id), never
   * from the request's own headers. Default `default`.
   */
  scope?: string | ((req: Req) => string | Promise<string>);
  /** Methods intercepted. Default POST and PATCH; GET, HEAD and OPTIONS never are. */
  methods?: readonly string[];
  /**
   * Run handlers unguarded when the ledger cannot be reached, instead of
   * answering 503. Explicit, and logged at every use.
   */
  failOpen?: boolean;
  /** Recorded as the lease owner, for operators. */
  owner?: string;
}

/** What the handler sees as `request.idempotency`. */
export interface RequestIdempotency {
  key: string;
  scope: string;
  operationId: string;
  attempt: number;
  /** A previous dispatched attempt's lease ran out (read / idempotent_write only). */
  recovered: boolean;
  /** With a PgLedger on a `transactional` route: the transaction the response commits with. */
  tx?: import('./ledger.js').TxClient;
}

export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_METHODS = ['POST', 'PATCH'] as const;
/** Never intercepted, whatever `methods` says: they must not change anything. */
export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const NOT_APPLIED = Symbol.for('idem.notApplied');

/**
 * Marks an error as thrown before anything was applied, so a 5xx releases
 * the operation (a retry runs it again) instead of making it unknown.
 */
export function notApplied<E extends object>(error: E): E {
  (error as Record<symbol, unknown>)[NOT_APPLIED] = true;
  return error;
}

export function isNotApplied(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[NOT_APPLIED] === true
  );
}
