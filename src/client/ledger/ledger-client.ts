/**
 * `LedgerClient`: one typed method per endpoint of the ledger's HTTP contract
 * (v1). Every key is percent-encoded as ONE path segment, every problem
 * becomes a `LedgerError`, and only calls that are safe to repeat are retried.
 */
import { randomUUID } from 'node:crypto';
import type { TSchema } from 'typebox';
import {
  type ApproveBody,
  type BeginBody,
  BeginResponse,
  type CompleteBody,
  EventsResponse,
  type ListQuery,
  ListResponse,
  type Operation,
  OperationResponse,
  type RejectBody,
  type ResolveBody,
  StatsResponse,
} from '../../contract/index.js';
import { parseRetryAfter } from './ledger-error.js';
import { LedgerHttp, type LedgerHttpOptions } from './ledger-http.js';

/** Options of a {@link LedgerClient}. */
export interface LedgerClientOptions extends LedgerHttpOptions {}

/** Per-call options. */
export interface CallOptions {
  /** Cancels the call (and its retries); the signal's reason is thrown. */
  signal?: AbortSignal;
}

/** @deprecated The contract's `BeginBody` (the same type): `begin` takes that. */
export type BeginInput = BeginBody;

/**
 * What `begin` answered over HTTP: `acquired` (201/200), `pending_approval`
 * (202) or `replayed` (200), with the lease id that was sent. (The server's
 * `BeginReply`, in src/ledger, is what its begin decided, not this.)
 */
export interface BeginResult extends BeginResponse {
  /** 201 new key, 200 re-entered or replayed, 202 pending approval. */
  httpStatus: number;
  /** The lease id that was sent: the one to use for lease-holder calls when acquired. */
  leaseId: string;
  /** From `Retry-After` on 202. */
  retryAfterMs: number | undefined;
}

const seg = encodeURIComponent;
const opPath = (scope: string, key: string, action?: string) =>
  `/v1/scopes/${seg(scope)}/operations/${seg(key)}${action ? `/${action}` : ''}`;

/**
 * Typed client of the ledger service. Uses the global `fetch` (or the one
 * given) and nothing from the server side.
 *
 * Retries (capped, full jitter): transport failures and 503 of `begin` (it
 * always sends a client-chosen `leaseId`, so a lost answer is recovered by
 * sending the same lease again), of every read, and of the lease-holder calls
 * (same lease, same outcome). `approve`, `reject` and `resolve` are retried
 * only on 503 or when the request provably never left (connection refused),
 * because a second send after a lost answer would fail with `INVALID_STATE`
 * although the first one worked.
 */
export class LedgerClient {
  readonly #http: LedgerHttp;

  constructor(options: LedgerClientOptions) {
    this.#http = new LedgerHttp(options);
  }

  /**
   * `POST /v1/scopes/{scope}/operations`: register or re-enter an operation.
   * A `leaseId` is generated when the body has none, so begin is always safe to retry.
   */
  async begin(scope: string, body: BeginBody, options: CallOptions = {}): Promise<BeginResult> {
    const leaseId = body.leaseId ?? randomUUID();
    const res = await this.#http.send<BeginResponse>({
      method: 'POST',
      path: `/v1/scopes/${seg(scope)}/operations`,
      body: { ...body, leaseId },
      repeatable: true,
      schema: BeginResponse,
      signal: options.signal,
    });
    return {
      ...res.body,
      httpStatus: res.status,
      leaseId,
      retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
    };
  }

  /** `GET /v1/scopes/{scope}/operations/{key}`, rule A applied by the service. */
  async get(scope: string, key: string, options: CallOptions = {}): Promise<Operation> {
    return (await this.#read<{ operation: Operation }>(opPath(scope, key), OperationResponse, options))
      .operation;
  }

  /** `GET /v1/operations/{id}`. */
  async getById(id: string, options: CallOptions = {}): Promise<Operation> {
    return (
      await this.#read<{ operation: Operation }>(`/v1/operations/${seg(id)}`, OperationResponse, options)
    ).operation;
  }

  /** Marks the side effect as started; needs a live lease. */
  dispatch(
    scope: string,
    key: string,
    leaseId: string,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#holder(scope, key, 'dispatch', { leaseId }, options);
  }

  /** Extends the live lease by `leaseMs` (the service default when absent). */
  heartbeat(
    scope: string,
    key: string,
    leaseId: string,
    leaseMs?: number,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#holder(
      scope,
      key,
      'heartbeat',
      leaseMs === undefined ? { leaseId } : { leaseId, leaseMs },
      options,
    );
  }

  /** Stores the outcome; terminal. Repeating it with the same status and result is a no-op. */
  complete(
    scope: string,
    key: string,
    body: CompleteBody,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#holder(scope, key, 'complete', body, options);
  }

  /** The effect did not happen: back to `ready`. */
  release(
    scope: string,
    key: string,
    leaseId: string,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#holder(scope, key, 'release', { leaseId }, options);
  }

  /** The holder cannot tell whether the effect happened: `outcome_unknown`. */
  unknown(
    scope: string,
    key: string,
    leaseId: string,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#holder(scope, key, 'unknown', { leaseId }, options);
  }

  /** Operator: `pending_approval` to `ready`. */
  approve(
    scope: string,
    key: string,
    body: ApproveBody = {},
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#operator(scope, key, 'approve', body, options);
  }

  /** Operator: `pending_approval` to `rejected`. */
  reject(
    scope: string,
    key: string,
    body: RejectBody = {},
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#operator(scope, key, 'reject', body, options);
  }

  /** Operator: `outcome_unknown` to `succeeded`, `failed` or `ready`; compare-and-set with `expectedAttempt`. */
  resolve(
    scope: string,
    key: string,
    body: ResolveBody,
    options: CallOptions = {},
  ): Promise<OperationResponse> {
    return this.#operator(scope, key, 'resolve', body, options);
  }

  /** The operation's events, oldest first. */
  async events(scope: string, key: string, options: CallOptions = {}): Promise<EventsResponse['events']> {
    return (await this.#read<EventsResponse>(opPath(scope, key, 'events'), EventsResponse, options)).events;
  }

  /** One page of `GET /v1/operations`, oldest first. */
  async list(query: ListQuery = {}, options: CallOptions = {}): Promise<ListResponse> {
    const res = await this.#http.send<ListResponse>({
      method: 'GET',
      path: '/v1/operations',
      query: { ...query },
      repeatable: true,
      schema: ListResponse,
      signal: options.signal,
    });
    return res.body;
  }

  /** Every operation matching `query`, following `nextCursor` page by page. */
  async *listAll(
    query: Omit<ListQuery, 'cursor'> = {},
    options: CallOptions = {},
  ): AsyncGenerator<Operation> {
    let cursor: string | undefined;
    do {
      const page = await this.list(cursor === undefined ? query : { ...query, cursor }, options);
      yield* page.items;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Operator: per-scope counts of non-terminal statuses. */
  async stats(options: CallOptions = {}): Promise<StatsResponse> {
    return this.#read<StatsResponse>('/v1/stats', StatsResponse, options);
  }

  async #read<T>(path: string, schema: TSchema, options: CallOptions): Promise<T> {
    const res = await this.#http.send<T>({
      method: 'GET',
      path,
      repeatable: true,
      schema,
      signal: options.signal,
    });
    return res.body;
  }

  async #holder(
    scope: string,
    key: string,
    action: string,
    body: object,
    options: CallOptions,
  ): Promise<OperationResponse> {
    // Same lease, same request: the service answers a repeat the same way
    // (complete is a no-op when equal), so a lost answer is safe to recover.
    const res = await this.#http.send<OperationResponse>({
      method: 'POST',
      path: opPath(scope, key, action),
      body,
      repeatable: true,
      schema: OperationResponse,
      signal: options.signal,
    });
    return res.body;
  }

  async #operator(
    scope: string,
    key: string,
    action: string,
    body: object,
    options: CallOptions,
  ): Promise<OperationResponse> {
    const res = await this.#http.send<OperationResponse>({
      method: 'POST',
      path: opPath(scope, key, action),
      body,
      repeatable: false,
      schema: OperationResponse,
      signal: options.signal,
    });
    return res.body;
  }
}
