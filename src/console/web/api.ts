/**
 * The console's only way to the ledger: the public HTTP API, with the
 * signed-in key as `Authorization: Bearer`. It can never do more than that key.
 */
import type {
  EventsResponse,
  ListQuery,
  ListResponse,
  Operation,
  OperationResponse,
  StatsResponse,
} from '../../contract/index.js';
import { setServerSkew } from './format.js';

export type { Operation, OperationEvent } from '../../contract/index.js';
/** One scope's row of /v1/stats. */
export type ScopeStats = StatsResponse['scopes'][number];

/** Local copies (type-checked against the contract) so the bundle carries no schema library. */
export const EFFECTS: readonly Operation['effect'][] = [
  'read',
  'idempotent_write',
  'non_idempotent_write',
  'unclassified',
];

/** A failed call: the problem+json the service answered, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }

  /** Someone else acted first (the operation changed under us). */
  get conflict(): boolean {
    return this.status === 409;
  }
}

const path = (scope: string, key: string, action?: string) =>
  `/v1/scopes/${encodeURIComponent(scope)}/operations/${encodeURIComponent(key)}${action ? `/${action}` : ''}`;

export class Api {
  constructor(private readonly apiKey: string) {}

  private async call<T>(method: 'GET' | 'POST', url: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.apiKey}`,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'omit',
        referrerPolicy: 'no-referrer',
      });
    } catch {
      throw new ApiError(0, 'NETWORK', 'the service did not answer (network error)');
    }
    const date = res.headers.get('date');
    if (date) setServerSkew(Date.parse(date) - Date.now());
    const payload = (await res.json().catch(() => null)) as Record<string, unknown> | null;
    if (!res.ok) {
      const code = typeof payload?.code === 'string' ? payload.code : `HTTP_${res.status}`;
      const detail = typeof payload?.detail === 'string' ? payload.detail : res.statusText;
      throw new ApiError(res.status, code, detail || `HTTP ${res.status}`);
    }
    return payload as T;
  }

  list(q: ListQuery): Promise<ListResponse> {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') params.set(k, String(v));
    return this.call('GET', `/v1/operations?${params}`);
  }

  stats(): Promise<StatsResponse> {
    return this.call('GET', '/v1/stats');
  }

  async get(scope: string, key: string): Promise<Operation> {
    return (await this.call<OperationResponse>('GET', path(scope, key))).operation;
  }

  async getById(id: string): Promise<Operation> {
    return (await this.call<OperationResponse>('GET', `/v1/operations/${encodeURIComponent(id)}`)).operation;
  }

  async events(scope: string, key: string): Promise<EventsResponse['events']> {
    return (await this.call<EventsResponse>('GET', path(scope, key, 'events'))).events;
  }

  async approve(op: Operation, note?: string): Promise<Operation> {
    // The fingerprint shown to the operator: if the pending request changed since, the service says 409.
    const body = { fingerprint: op.fingerprint, ...(note ? { note } : {}) };
    return (await this.call<OperationResponse>('POST', path(op.scope, op.key, 'approve'), body)).operation;
  }

  async reject(op: Operation, note: string): Promise<Operation> {
    return (await this.call<OperationResponse>('POST', path(op.scope, op.key, 'reject'), { note })).operation;
  }

  async resolve(
    op: Operation,
    status: 'succeeded' | 'failed' | 'ready',
    note: string,
    result: { value: unknown } | null,
  ): Promise<Operation> {
    // expectedAttempt is the attempt the operator was looking at: a newer attempt makes it a 409.
    const body = { status, note, expectedAttempt: op.attempt, ...(result ? { result: result.value } : {}) };
    return (await this.call<OperationResponse>('POST', path(op.scope, op.key, 'resolve'), body)).operation;
  }

  /** Whether this key is an operator's: /v1/stats is operator-only, so a client key gets 403. */
  async role(): Promise<'operator' | 'client'> {
    try {
      await this.stats();
      return 'operator';
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) return 'client';
      throw err;
    }
  }
}
