/** Small typed wrappers over `app.inject` for the ledger endpoints. */

import { sql } from 'drizzle-orm';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Database } from '../../src/db/database.js';

/** Test replies are read loosely on purpose: assertions check their shape. */
// biome-ignore lint/suspicious/noExplicitAny: a test reads arbitrary JSON bodies
export interface Reply<T = Record<string, any>> {
  status: number;
  body: T;
  headers: LightMyRequestResponse['headers'];
  raw: string;
}

export function client(app: FastifyInstance, scope = 'orders', token?: string) {
  const call = async (method: 'GET' | 'POST', url: string, payload?: unknown): Promise<Reply> => {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const r = await app.inject({ method, url, payload: payload as object, headers });
    // biome-ignore lint/suspicious/noExplicitAny: see Reply
    let body: any;
    try {
      body = r.json();
    } catch {
      body = r.body;
    }
    return { status: r.statusCode, body, headers: r.headers, raw: r.body };
  };
  const op = (key: string, action = '') =>
    `/v1/scopes/${scope}/operations/${encodeURIComponent(key)}${action ? `/${action}` : ''}`;
  return {
    call,
    begin: (body: Record<string, unknown>) => call('POST', `/v1/scopes/${scope}/operations`, body),
    get: (key: string) => call('GET', op(key)),
    getById: (id: string) => call('GET', `/v1/operations/${id}`),
    events: (key: string) => call('GET', op(key, 'events')),
    dispatch: (key: string, leaseId: string) => call('POST', op(key, 'dispatch'), { leaseId }),
    heartbeat: (key: string, leaseId: string, leaseMs?: number) =>
      call('POST', op(key, 'heartbeat'), leaseMs === undefined ? { leaseId } : { leaseId, leaseMs }),
    complete: (key: string, leaseId: string, status: 'succeeded' | 'failed', result?: unknown) =>
      call(
        'POST',
        op(key, 'complete'),
        result === undefined ? { leaseId, status } : { leaseId, status, result },
      ),
    release: (key: string, leaseId: string) => call('POST', op(key, 'release'), { leaseId }),
    unknown: (key: string, leaseId: string) => call('POST', op(key, 'unknown'), { leaseId }),
    approve: (key: string, body: Record<string, unknown> = {}) => call('POST', op(key, 'approve'), body),
    reject: (key: string, body: Record<string, unknown> = {}) => call('POST', op(key, 'reject'), body),
    resolve: (key: string, body: Record<string, unknown>) => call('POST', op(key, 'resolve'), body),
  };
}

/**
 * Time travel without sleeping: moves an operation's lease expiry (or approval
 * deadline) into the past, as if the database clock had run on. Only the
 * deadline moves; every decision is still the service's, by `now()`.
 */
export async function expireLease(db: Database, scope: string, key: string): Promise<void> {
  await db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '1 millisecond'
    WHERE scope = ${scope} AND key = ${key}`);
}

export async function expireApproval(db: Database, scope: string, key: string): Promise<void> {
  await db.rows(sql`UPDATE idem_operations SET approval_deadline = now() - interval '1 millisecond'
    WHERE scope = ${scope} AND key = ${key}`);
}

/** Raw rows, to prove other rows were left alone. */
export async function snapshot(db: Database): Promise<Record<string, unknown>[]> {
  return db.rows(sql`SELECT * FROM idem_operations ORDER BY scope, key`);
}

export async function eventCount(db: Database, type?: string): Promise<number> {
  const rows = await db.rows<{ n: number }>(
    type
      ? sql`SELECT count(*)::int AS n FROM idem_events WHERE type = ${type}`
      : sql`SELECT count(*)::int AS n FROM idem_events`,
  );
  return rows[0]!.n;
}
