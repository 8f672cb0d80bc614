/**
 * The service's own statements, for the same-SQL diagnostic. Nothing here
 * retypes SQL: `BEGIN_INSERT`, `read_by_key` and `COMPLETE` are the `Statement`s the service
 * sends as named prepared statements, and their values come from the
 * service's own `beginValues` / `completeValues`. Only the per-transaction
 * values (key, ids, lease, event id) are marked with sentinels, so the
 * pgbench script can put its own expressions in their place; every other
 * parameter keeps the value the service binds.
 */
import { OPEN_PRINCIPAL } from '../../src/auth/keys.js';
import {
  APPROVAL_TIMEOUT_MS,
  type BeginBody,
  type CompleteBody,
  LEASE_MS,
  LIMITS,
  RETENTION_MS,
} from '../../src/contract/index.js';
import { bind, type Statement } from '../../src/db/statement.js';
import { canonicalJson, fingerprintOf } from '../../src/ledger/json-value.js';
import { BEGIN_INSERT, beginValues, type NewOperation } from '../../src/ledger/sql/begin.js';
import { COMPLETE, completeValues } from '../../src/ledger/sql/lease-holder.js';
import { BY_KEY } from '../../src/ledger/sql/read.js';

/** What every benchmark begin asks for: a small agent tool call. */
export const REQUEST = { tool: 'cancel_order', orderId: 'ORD-1002', amount: 30, currency: 'EUR' };
export const EFFECT = 'non_idempotent_write' as const;
/** What every benchmark complete stores. */
export const RESULT = { ok: true, refundId: 'RF-77' };

/** The begin body the HTTP load sends (minus `key` and `leaseId`, set per request). */
export const BEGIN_BODY: Omit<BeginBody, 'key'> = { request: REQUEST, effect: EFFECT };
export const COMPLETE_BODY: Omit<CompleteBody, 'leaseId'> = { status: 'succeeded', result: RESULT };

/** The canonical texts the service stores for them (same bytes on every side). */
export const REQUEST_TEXT = canonicalJson(REQUEST, 'request', LIMITS.requestBytes);
export const RESULT_TEXT = canonicalJson(RESULT, 'result', LIMITS.resultBytes);
export const FINGERPRINT = fingerprintOf(REQUEST_TEXT);

/** Values that vary per transaction; pgbench puts its own expressions where they appear. */
export const SENTINEL = {
  key: '\u0001bench-key\u0001',
  newId: 'b0000000-0000-4000-8000-00000000000a',
  leaseId: 'b0000000-0000-4000-8000-00000000000b',
  eventId: 'b0000000-0000-4000-8000-00000000000c',
} as const;

/** A statement's text and its values in `$n` order. */
export interface RenderedQuery {
  sql: string;
  params: unknown[];
}

const render = (st: Statement, values: Readonly<Record<string, unknown>>): RenderedQuery => ({
  sql: st.text,
  params: bind(st, values),
});

/**
 * The `NewOperation` the service builds for `BEGIN_BODY` from an open
 * (key-less) caller. `src/ledger/begin.ts` does not export this step, so its
 * defaults are applied here from the contract's constants; the parity check
 * (`parity.ts`) compares the rows both paths write, so a drift is reported.
 */
export function newOperationFor(scope: string, key: string, leaseId: string): NewOperation {
  const body = { ...BEGIN_BODY, key } as BeginBody;
  return {
    scope,
    key,
    fingerprint: FINGERPRINT,
    effect: body.effect ?? 'unclassified',
    leaseId,
    leaseMs: body.leaseMs ?? LEASE_MS.default,
    dispatch: body.dispatch ?? true,
    owner: body.owner ?? null,
    requireApproval: body.requireApproval ?? false,
    approvalTimeoutMs: body.approvalTimeoutMs ?? APPROVAL_TIMEOUT_MS.default,
    request: body.storeRequest === false ? null : REQUEST_TEXT,
    metadata: canonicalJson(body.metadata ?? {}, 'metadata', LIMITS.metadataBytes),
    retentionMs: body.retentionMs ?? RETENTION_MS.default,
    actor: OPEN_PRINCIPAL.name,
  };
}

/**
 * The service's begin statement with the per-transaction values as sentinels:
 * the insert it sends for a key it has not seen, or for one it has (`seen`,
 * as for S2's replays) the read it sends first (`read_by_key`), which answers
 * a key that exists without the insert.
 */
export function renderBegin(scope: string, seen = false): RenderedQuery {
  if (seen) return render(BY_KEY, { scope, key: SENTINEL.key });
  const op = newOperationFor(scope, SENTINEL.key, SENTINEL.leaseId);
  return render(BEGIN_INSERT, beginValues(op, { id: SENTINEL.newId, eventId: SENTINEL.eventId }));
}

/** The service's complete statement (`holder.complete` gets the canonical result text). */
export function renderComplete(scope: string): RenderedQuery {
  const values = completeValues({
    scope,
    key: SENTINEL.key,
    leaseId: SENTINEL.leaseId,
    actor: OPEN_PRINCIPAL.name,
    status: COMPLETE_BODY.status,
    result: RESULT_TEXT,
  });
  return render(COMPLETE, { ...values, eventId: SENTINEL.eventId });
}
